"""Alerts to a Slack-compatible webhook: failed runs, partial outcomes and scheduled jobs that missed their window.

A job tagged `orchestration/alerts: on_change` alerts on a change of outcome only: its first failed (or partial) run
after a different outcome alerts, the same outcome again is logged on the sensor's tick, and its first clean run
after them posts "Recovered". A refresh every 30 minutes through a TAB outage would otherwise post 2 alerts an hour.

The run-status sensors watch every code location (one Postgres run storage). Their cursor is Dagster's own event cursor,
so each failure is posted once. Their functions return None after posting, because a returned value ends the tick after
one run, while None lets a tick handle up to 5 runs. A function that returns None for some runs must never return a
SkipReason for another run of the same tick: Dagster refuses such a tick (it fails, and the sensor never moves past
it), so `partial_outcome_alert` logs "webhook disabled" instead of skipping.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from enum import StrEnum
from datetime import UTC, datetime, time, timedelta
from zoneinfo import ZoneInfo

import dagster as dg

from orchestration_core.audit.alert_webhook import ALERT_WEBHOOK_ENV, AlertWebhook
from orchestration_core.dagster_tags import RETRY_NUMBER_TAG, ROOT_RUN_ID_TAG, WILL_RETRY_TAG
from orchestration_core.run_outcome import (
    ALERT_ON_CHANGE,
    TAG_ALERTS,
    TAG_ERROR,
    TAG_ITEMS_FAILED,
    TAG_ITEMS_PROCESSED,
    TAG_OUTCOME,
    Outcome,
    outcome_of,
)
from orchestration_core.run_config_rules import deployment_resource
from orchestration_core.settings import racing_timezone

DISABLED_REASON = f"alerts disabled: {ALERT_WEBHOOK_ENV} is not set"


def slack_message(title: str, lines: Sequence[str]) -> dict:
    """A body Slack (and Mattermost/Discord-compatible bridges) accept: `text` as fallback plus one mrkdwn section."""
    body = "\n".join(lines)
    return {
        "text": f"{title}\n{body}",
        "blocks": [{"type": "section", "text": {"type": "mrkdwn", "text": f"*{title}*\n{body}"}}],
    }


def run_failure_message(run: dg.DagsterRun, error: str | None) -> dict:
    tags = run.tags
    lines = [f"job `{run.job_name}`, run `{run.run_id}`"]
    if error := tags.get(TAG_ERROR) or error:
        lines.append(f"error: {error[:500]}")
    if retry := tags.get(RETRY_NUMBER_TAG):
        lines.append(f"retry number {retry} of root run `{tags.get(ROOT_RUN_ID_TAG, '?')}`")
    if tags.get(WILL_RETRY_TAG) == "true":
        lines.append("Dagster will retry this run automatically.")
    return slack_message(f"Run failed: {run.job_name}", lines)


def partial_outcome_message(run: dg.DagsterRun) -> dict:
    tags = run.tags
    lines = [
        f"job `{run.job_name}`, run `{run.run_id}`",
        f"{tags.get(TAG_ITEMS_PROCESSED, '?')} items processed, {tags.get(TAG_ITEMS_FAILED, '?')} failed",
    ]
    if error := tags.get(TAG_ERROR):
        lines.append(f"error: {error[:500]}")
    return slack_message(f"Partial outcome: {run.job_name}", lines)


def recovered_message(run: dg.DagsterRun, previous: str) -> dict:
    return slack_message(f"Recovered: {run.job_name}",
                         [f"job `{run.job_name}`, run `{run.run_id}` succeeded after a {previous} run"])


class Change(StrEnum):
    ALERT = "alert"  # failed or partial, and the previous run's outcome was different
    REPEAT = "repeat"  # failed or partial again: already alerted
    RECOVERED = "recovered"  # clean after a failed or partial run
    NONE = "none"  # clean after clean


def outcome_change(outcome: str, previous: str | None) -> Change:
    """How a run of an on-change job compares with the job's previous finished run (None: it has none)."""
    if outcome == Outcome.SUCCESS.value:
        return Change.RECOVERED if previous in (Outcome.FAILED.value, Outcome.PARTIAL.value) else Change.NONE
    return Change.REPEAT if previous == outcome else Change.ALERT


def _change(instance: dg.DagsterInstance, run: dg.DagsterRun) -> tuple[Change, str | None] | None:
    """The change this run makes for an on-change job and the previous run's outcome; None for every other job (they
    alert on every run)."""
    if run.tags.get(TAG_ALERTS) != ALERT_ON_CHANGE:
        return None
    record = instance.get_run_record_by_id(run.run_id)
    filters = dg.RunsFilter(job_name=run.job_name, statuses=[dg.DagsterRunStatus.SUCCESS, dg.DagsterRunStatus.FAILURE],
                            created_before=record.create_timestamp.astimezone(UTC).replace(tzinfo=None))
    previous = instance.get_run_records(filters=filters, limit=1)
    before = outcome_of(previous[0].dagster_run.status, previous[0].dagster_run.tags) if previous else None
    return outcome_change(outcome_of(run.status, run.tags), before), before


def _step_error(context: dg.RunFailureSensorContext) -> str | None:
    for event in context.get_step_failure_events():
        if event.step_failure_data and event.step_failure_data.error:
            error = event.step_failure_data.error
            while error.cause:  # the user's exception sits under Dagster's step-execution wrapper
                error = error.cause
            return f"{event.step_key}: {error.message.strip()}"
    return context.failure_event.message


@dg.run_failure_sensor(
    name="run_failure_alert",
    monitor_all_code_locations=True,
    default_status=dg.DefaultSensorStatus.RUNNING,
    description="Posts every failed run (any code location) to the alert webhook.",
)
def run_failure_alert(context: dg.RunFailureSensorContext, alert_webhook: AlertWebhook):
    if not alert_webhook.enabled:
        return dg.SkipReason(DISABLED_REASON)
    change = _change(context.instance, context.dagster_run)
    if change and change[0] == Change.REPEAT:
        context.log.info(f"{context.dagster_run.job_name} run {context.dagster_run.run_id} failed again: alerted "
                         "on its first failure, next on its recovery")
        return None
    alert_webhook.post(run_failure_message(context.dagster_run, _step_error(context)))
    return None


@dg.run_status_sensor(
    name="partial_outcome_alert",
    run_status=dg.DagsterRunStatus.SUCCESS,
    monitor_all_code_locations=True,
    default_status=dg.DefaultSensorStatus.RUNNING,
    description="Posts successful runs whose outcome tag is partial (some items failed for good), and the recovery "
    "of a job that alerts on change.",
)
def partial_outcome_alert(context: dg.RunStatusSensorContext, alert_webhook: AlertWebhook):
    run = context.dagster_run
    partial = run.tags.get(TAG_OUTCOME) == Outcome.PARTIAL.value
    if not partial and run.tags.get(TAG_ALERTS) != ALERT_ON_CHANGE:
        return None  # nothing to say about a clean success; keep going through this tick's runs
    if not alert_webhook.enabled:
        # Logged, not a SkipReason: the tick's other runs returned None, and Dagster refuses a tick that mixes the
        # two (the sensor then fails on every tick and never moves past this run).
        context.log.info(f"{run.job_name} run {run.run_id}: not posted, {DISABLED_REASON}")
        return None
    change, previous = _change(context.instance, run) or (None, None)
    if change == Change.REPEAT:
        context.log.info(f"{run.job_name} run {run.run_id} partial again: alerted on the first, next on recovery")
    elif change == Change.RECOVERED:
        alert_webhook.post(recovered_message(run, previous))
    elif partial:
        alert_webhook.post(partial_outcome_message(run))
    return None


# ---- freshness: scheduled jobs that have not succeeded within their expected interval ----


@dataclass(frozen=True)
class DailyDeadline:
    """`job_name` must have succeeded between local midnight and `deadline` (racing timezone) every day."""

    job_name: str
    deadline: time


@dataclass(frozen=True)
class MaxAge:
    """`job_name` must have succeeded within the last `max_age`."""

    job_name: str
    max_age: timedelta


@dataclass(frozen=True)
class MissedWindow:
    key: str  # one alert per key
    job_name: str
    description: str


FRESHNESS_EXPECTATIONS: tuple[DailyDeadline | MaxAge, ...] = (
    # The 06:00 scrape retries a failed or still-empty combination 3 times, 30 minutes apart (its documented retry
    # window, racing_orchestration/ingestion/jobs.py): an ordinary retried morning succeeds by about 07:35. 08:00
    # leaves its last attempts 30 minutes (tests/racing_orchestration/ingestion/test_scrape_freshness.py checks it).
    DailyDeadline("morning_scrape", time(8, 0)),
    MaxAge("cleanup_job_runs", timedelta(hours=25)),
)


def missed_windows(
    expectations: Sequence[DailyDeadline | MaxAge],
    now: datetime,
    successes: dict[str, list[datetime]],
    watching_since: datetime,
    tz: ZoneInfo,
) -> list[MissedWindow]:
    """Windows that ended (after watching began) without a success. `successes`: end times of recent successes."""
    missed = []
    for exp in expectations:
        ends = successes.get(exp.job_name, [])
        if isinstance(exp, DailyDeadline):
            local_now = now.astimezone(tz)
            deadline = datetime.combine(local_now.date(), exp.deadline, tzinfo=tz)
            if local_now < deadline:
                deadline = datetime.combine(local_now.date() - timedelta(days=1), exp.deadline, tzinfo=tz)
            day_start = datetime.combine(deadline.date(), time(0), tzinfo=tz)
            if deadline <= watching_since or any(day_start <= end <= deadline for end in ends):
                continue
            missed.append(
                MissedWindow(
                    f"{exp.job_name}:{deadline.date().isoformat()}",
                    exp.job_name,
                    f"`{exp.job_name}` had not succeeded by {exp.deadline:%H:%M} {tz.key} on {deadline.date()}",
                )
            )
        else:
            since = max(ends, default=None) or watching_since
            periods = int((now - since) / exp.max_age)
            if periods < 1:
                continue
            last = f"last success {since.astimezone(UTC):%Y-%m-%d %H:%M} UTC" if ends else "no success seen yet"
            missed.append(
                MissedWindow(
                    f"{exp.job_name}:{since.astimezone(UTC).isoformat()}:{periods}",
                    exp.job_name,
                    f"`{exp.job_name}` has not succeeded within {exp.max_age.total_seconds() / 3600:g} h ({last})",
                )
            )
    return missed


def recent_success_end_times(instance: dg.DagsterInstance, job_name: str, limit: int = 20) -> list[datetime]:
    records = instance.get_run_records(
        filters=dg.RunsFilter(job_name=job_name, statuses=[dg.DagsterRunStatus.SUCCESS]), limit=limit
    )
    return [datetime.fromtimestamp(rec.end_time, UTC) for rec in records if rec.end_time]


_MAX_REMEMBERED_KEYS = 100


def make_freshness_sensor(
    expectations: Sequence[DailyDeadline | MaxAge] = FRESHNESS_EXPECTATIONS,
    clock: Callable[[], datetime] = lambda: datetime.now(UTC),
    name: str = "scheduled_job_freshness",
) -> dg.SensorDefinition:
    """A sensor (every 5 min) posting once per missed window; its cursor keeps alerted keys and the watch start."""

    @dg.sensor(
        name=name,
        minimum_interval_seconds=300,
        default_status=dg.DefaultSensorStatus.RUNNING,
        description="Alerts when a scheduled job has not succeeded within its expected interval.",
    )
    def _freshness(context: dg.SensorEvaluationContext, alert_webhook: AlertWebhook):
        now = clock()
        state = json.loads(context.cursor) if context.cursor else {}
        watching_since = datetime.fromisoformat(state.get("watching_since", now.isoformat()))
        alerted: list[str] = state.get("alerted", [])
        successes = {exp.job_name: recent_success_end_times(context.instance, exp.job_name) for exp in expectations}
        tz = ZoneInfo(racing_timezone())
        due = [m for m in missed_windows(expectations, now, successes, watching_since, tz) if m.key not in alerted]
        if due and not alert_webhook.enabled:
            reason = f"{DISABLED_REASON}; missed: {', '.join(m.key for m in due)}"
        elif due:
            for window in due:
                alert_webhook.post(slack_message(f"Missed schedule: {window.job_name}", [window.description]))
                alerted.append(window.key)  # remembered one by one: a failed post is retried next tick
                context.update_cursor(_dump(watching_since, alerted))
            reason = f"alerted: {', '.join(m.key for m in due)}"
        else:
            reason = "every scheduled job succeeded within its window (or was already alerted)"
        context.update_cursor(_dump(watching_since, alerted))
        return dg.SkipReason(reason)

    return _freshness


def _dump(watching_since: datetime, alerted: list[str]) -> str:
    return json.dumps({"watching_since": watching_since.isoformat(), "alerted": alerted[-_MAX_REMEMBERED_KEYS:]})


scheduled_job_freshness = make_freshness_sensor()


def deployment_alert_webhook() -> AlertWebhook:
    """ALERT_WEBHOOK_URL when it is set, disabled otherwise (the sensors then skip with that reason)."""
    return AlertWebhook(url=dg.EnvVar(ALERT_WEBHOOK_ENV).get_value() or None)


def alert_webhook_from_env() -> dg.ResourceDefinition:
    """The webhook resource, built where it is used from the deployment's setting; run config cannot aim it
    elsewhere (orchestration_core/run_config_rules.py)."""
    return deployment_resource(deployment_alert_webhook, "The alert webhook at ALERT_WEBHOOK_URL (Slack-compatible).")
