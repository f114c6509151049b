"""Freshness in Dagster's terms: the policies of the daily assets (race_cards must arrive within the morning scrape's
documented retry window), evaluated by Dagster's freshness daemon on a real instance, and the alert that takes a
stale asset to a person through the webhook, once per stale spell, then "Fresh again"."""

import datetime as dt
from zoneinfo import ZoneInfo

import dagster as dg
import pytest

from orchestration_core.audit.alert_webhook import AlertWebhook
from racing_orchestration.definitions import defs
from racing_orchestration.ingestion.jobs import COMBINATION_MAX_RETRIES, COMBINATION_RETRY_DELAY_SECONDS
from racing_orchestration.race_data.freshness import FreshnessAlert, freshness_alerts, race_data_freshness_alert
from tests.conftest import REPO_ROOT
from tests.orchestration_core.audit.conftest import webhook  # noqa: F401 - the capturing webhook fixture

NZ = ZoneInfo("Pacific/Auckland")
DAY = dt.date(2026, 11, 29)
RACE_CARDS = dg.AssetKey("race_cards")


def _at(hour: int, minute: int = 0) -> dt.datetime:
    return dt.datetime.combine(DAY, dt.time(hour, minute), NZ)


@pytest.mark.unit
def test_race_cards_must_arrive_within_the_morning_scrapes_retry_window() -> None:
    policy = defs.resolve_asset_graph().get(RACE_CARDS).freshness_policy
    retry_window = dt.timedelta(seconds=COMBINATION_MAX_RETRIES * COMBINATION_RETRY_DELAY_SECONDS)
    assert retry_window == dt.timedelta(minutes=90)  # 3 retries x 30 minutes, as the README documents
    assert policy.deadline_cron == "45 7 * * *" and policy.timezone == "Pacific/Auckland"
    # From the 06:00 scrape to its last retry at 07:30, plus 15 minutes for that attempt and the run queue.
    assert policy.lower_bound_delta == retry_window + dt.timedelta(minutes=15)


@pytest.mark.unit
@pytest.mark.parametrize("asset", ["market_movers", "race_day_export"])
def test_the_derived_assets_must_be_refreshed_every_racing_day(asset) -> None:
    policy = defs.resolve_asset_graph().get(dg.AssetKey(asset)).freshness_policy
    assert (policy.deadline_cron, policy.lower_bound_delta) == ("0 23 * * *", dt.timedelta(hours=24))


@pytest.mark.unit
@pytest.mark.parametrize(
    ("states", "alerted", "expected"),
    [
        ({"race_cards": ("PASS", 1.0)}, {}, []),
        ({"race_cards": ("FAIL", 2.0)}, {}, [FreshnessAlert("race_cards", True, 2.0)]),
        ({"race_cards": ("FAIL", 2.0)}, {"race_cards": 2.0}, []),  # the same stale spell: already alerted
        ({"race_cards": ("FAIL", 5.0)}, {"race_cards": 2.0}, [FreshnessAlert("race_cards", True, 5.0)]),
        ({"race_cards": ("PASS", 6.0)}, {"race_cards": 5.0}, [FreshnessAlert("race_cards", False, 6.0)]),
        ({"race_cards": ("UNKNOWN", 1.0)}, {}, []),  # never materialized: nothing to say yet
    ],
)
def test_one_alert_per_stale_spell_and_one_on_recovery(states, alerted, expected) -> None:
    assert freshness_alerts(states, alerted) == expected


def _evaluate_freshness(workspace) -> None:
    from dagster._daemon.freshness import FreshnessDaemon

    list(FreshnessDaemon().run_iteration(workspace))


def _tick(instance, url: str, cursor: str | None):
    context = dg.build_sensor_context(instance=instance, cursor=cursor,
                                      resources={"alert_webhook": AlertWebhook(url=url, retry_delay_seconds=0)})
    result = race_data_freshness_alert(context)
    return result, context.cursor


@pytest.mark.integration
def test_a_card_stored_before_the_window_is_stale_at_the_deadline_and_alerted_once(pg_instance, webhook,  # noqa: F811
                                                                                    monkeypatch) -> None:
    from dagster._core.test_utils import create_test_daemon_workspace_context, freeze_time
    from dagster._core.workspace.load_target import ModuleTarget

    monkeypatch.setenv("RACING_DATABASE_URL", "postgresql+psycopg2://unused@127.0.0.1:9/never_opened")
    target = ModuleTarget(module_name="racing_orchestration.definitions", attribute=None,
                          working_directory=str(REPO_ROOT), location_name="racing_orchestration")
    with create_test_daemon_workspace_context(workspace_load_target=target, instance=pg_instance) as workspace:
        with freeze_time(_at(5, 0)):  # yesterday's card refreshed at 05:00, before today's window opens at 06:00
            pg_instance.report_runless_asset_event(dg.AssetMaterialization(RACE_CARDS, partition=str(DAY)))
        with freeze_time(_at(7, 40)):  # inside the window (the scrape's last retry starts 07:30): still fine
            _evaluate_freshness(workspace)
            _, cursor = _tick(pg_instance, webhook.url, None)
        assert webhook.posts == []
        with freeze_time(_at(7, 50)):  # the 07:45 deadline passed with no card since 06:00
            _evaluate_freshness(workspace)
            for _ in range(3):  # the sensor ticks every 5 minutes through the stale spell
                _, cursor = _tick(pg_instance, webhook.url, cursor)
        [stale] = webhook.posts
        assert stale["text"].startswith("Stale: race_cards") and "06:00 and 07:45" in stale["text"]
        with freeze_time(_at(8, 5)):  # the card arrives late (a card refresh): fresh again, said once
            pg_instance.report_runless_asset_event(dg.AssetMaterialization(RACE_CARDS, partition=str(DAY)))
            _evaluate_freshness(workspace)
            _, cursor = _tick(pg_instance, webhook.url, cursor)
            _tick(pg_instance, webhook.url, cursor)
    assert [p["text"].split("\n")[0] for p in webhook.posts] == ["Stale: race_cards", "Fresh again: race_cards"]


@pytest.mark.integration
def test_without_a_webhook_the_alert_says_why_it_skips(pg_instance) -> None:
    context = dg.build_sensor_context(instance=pg_instance, resources={"alert_webhook": AlertWebhook(url=None)})
    result = race_data_freshness_alert(context)
    assert isinstance(result, dg.SkipReason) and "ALERT_WEBHOOK_URL" in result.skip_message
