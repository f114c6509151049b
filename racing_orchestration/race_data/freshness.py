"""Freshness of the daily race data in Dagster's own terms, and the alert that takes a stale asset to a person.

Policies (Dagster's FreshnessPolicy, evaluated by the daemon's freshness daemon, shown on each asset's page):

- `race_cards`: stored between 06:00 and 07:45 racing time every day. The 06:00 morning scrape tries a failed
  combination again 30 minutes later at most 3 times (README, "Racing: what runs when"), so its last attempt starts
  at 07:30; 15 minutes more cover the attempt itself and the run queue. A card refresh (from 07:00) storing the card
  counts too: what matters is that today's card arrived. The scrape records the day as soon as a combination has
  stored meetings for it, so a card that arrived is fresh while other combinations still wait for their retries;
  the window is unchanged (a day no combination stored anything for by 07:45 is still stale).
- `market_movers`, `race_day_export`: brought up to date at least once in the 24 hours before 23:00 racing time,
  i.e. during each racing day (the automation refreshes them every few minutes while data arrives).

Dagster OSS shows freshness but sends nothing, so `race_data_freshness_alert` posts to ALERT_WEBHOOK_URL when one of
these assets turns stale (FAIL), once per stale spell, and "Fresh again" when it recovers.
"""

from __future__ import annotations

import datetime as dt
import json
from collections.abc import Mapping
from dataclasses import dataclass

import dagster as dg

from orchestration_core.audit.alert_webhook import AlertWebhook
from orchestration_core.audit.alerts import DISABLED_REASON, slack_message
from orchestration_core.settings import racing_timezone
from racing_orchestration.ingestion.jobs import COMBINATION_MAX_RETRIES, COMBINATION_RETRY_DELAY_SECONDS
from racing_orchestration.race_data.catalog import MARKET_MOVERS, RACE_CARDS, RACE_DAY_EXPORT

MORNING_SCRAPE_AT = dt.time(6, 0)
# The scrape's last retry starts 3 x 30 min after 06:00; the attempt itself and the run queue get 15 minutes more.
MORNING_SCRAPE_SLACK = dt.timedelta(minutes=15)
CARD_WINDOW = dt.timedelta(seconds=COMBINATION_MAX_RETRIES * COMBINATION_RETRY_DELAY_SECONDS) + MORNING_SCRAPE_SLACK
CARD_DEADLINE = (dt.datetime.combine(dt.date(2000, 1, 1), MORNING_SCRAPE_AT) + CARD_WINDOW).time()

RACE_CARDS_FRESHNESS = dg.FreshnessPolicy.cron(
    deadline_cron=f"{CARD_DEADLINE.minute} {CARD_DEADLINE.hour} * * *",
    lower_bound_delta=CARD_WINDOW,
    timezone=racing_timezone(),
)
DAILY_DERIVED_FRESHNESS = dg.FreshnessPolicy.cron(
    deadline_cron="0 23 * * *", lower_bound_delta=dt.timedelta(hours=24), timezone=racing_timezone(),
)
WATCHED = {
    RACE_CARDS: f"no card stored between {MORNING_SCRAPE_AT:%H:%M} and {CARD_DEADLINE:%H:%M} racing time (the "
                "morning scrape with its retries, or a card refresh)",
    MARKET_MOVERS: "not brought up to date during the racing day (race_data_automation)",
    RACE_DAY_EXPORT: "not brought up to date during the racing day (race_data_automation)",
}
FAIL, PASS = "FAIL", "PASS"


@dataclass(frozen=True)
class FreshnessAlert:
    asset: str
    stale: bool  # True: turned stale; False: fresh again
    since: float  # when the state changed (unix time): one alert per stale spell


def freshness_alerts(states: Mapping[str, tuple[str, float]], alerted: Mapping[str, float]) -> list[FreshnessAlert]:
    """Pure: alerts for assets that turned FAIL since they were last alerted, and for alerted ones back to PASS.
    `states`: asset -> (freshness state, changed at); `alerted`: asset -> change time of the stale spell alerted."""
    alerts = []
    for asset, (state, since) in sorted(states.items()):
        if state == FAIL and alerted.get(asset) != since:
            alerts.append(FreshnessAlert(asset, True, since))
        elif state == PASS and asset in alerted:
            alerts.append(FreshnessAlert(asset, False, since))
    return alerts


def alert_message(alert: FreshnessAlert, last_update: float | None) -> dict:
    key = dg.AssetKey(alert.asset)
    last = (f"last update {dt.datetime.fromtimestamp(last_update, dt.UTC):%Y-%m-%d %H:%M} UTC"
            if last_update else "never updated")
    if alert.stale:
        why = WATCHED.get(key, "its freshness policy failed")
        return slack_message(f"Stale: {alert.asset}", [f"`{alert.asset}`: {why}", last])
    return slack_message(f"Fresh again: {alert.asset}", [f"`{alert.asset}` meets its freshness policy again ({last})"])


@dg.sensor(
    minimum_interval_seconds=300,
    default_status=dg.DefaultSensorStatus.RUNNING,
    description="Posts to the alert webhook when race_cards, market_movers or race_day_export turns stale under its "
    "Dagster freshness policy (once per stale spell), and when it is fresh again.",
)
def race_data_freshness_alert(context: dg.SensorEvaluationContext, alert_webhook: AlertWebhook):
    if not alert_webhook.enabled:
        return dg.SkipReason(DISABLED_REASON)
    records = context.instance.get_freshness_state_records(list(WATCHED))
    states = {key.to_user_string(): (record.freshness_state.value, record.updated_at.timestamp())
              for key, record in records.items()}
    alerted: dict[str, float] = json.loads(context.cursor) if context.cursor else {}
    alerts = freshness_alerts(states, alerted)
    for alert in alerts:
        event = context.instance.get_latest_materialization_event(dg.AssetKey(alert.asset))
        alert_webhook.post(alert_message(alert, event.timestamp if event else None))
        if alert.stale:
            alerted[alert.asset] = alert.since
        else:
            alerted.pop(alert.asset, None)
        # After each delivery: a failed post later in the loop fails the tick without repeating this one.
        context.update_cursor(json.dumps(alerted, sort_keys=True))
    if not alerts:
        return dg.SkipReason("freshness: " + ", ".join(f"{a} {s}" for a, (s, _) in sorted(states.items()))
                             if states else "freshness: not evaluated yet")
    return None
