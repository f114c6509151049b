"""Pure alert logic: missed windows and Slack-compatible message bodies."""

from __future__ import annotations

from datetime import UTC, datetime, time, timedelta
from zoneinfo import ZoneInfo

import dagster as dg
import pytest

from orchestration_core.audit.alerts import (
    Change,
    DailyDeadline,
    MaxAge,
    missed_windows,
    outcome_change,
    partial_outcome_message,
    run_failure_message,
)

pytestmark = pytest.mark.unit
NZ = ZoneInfo("Pacific/Auckland")
SCRAPE = DailyDeadline("morning_scrape", time(6, 30))
CLEANUP = MaxAge("cleanup_job_runs", timedelta(hours=25))
WATCHING = datetime(2025, 6, 1, tzinfo=UTC)


def nz(day: int, hour: int, minute: int = 0) -> datetime:
    return datetime(2025, 6, day, hour, minute, tzinfo=NZ)


@pytest.mark.parametrize(
    ("now", "successes", "watching", "expected_keys"),
    [
        (nz(10, 6, 29), [], WATCHING, ["morning_scrape:2025-06-09"]),  # yesterday's window was missed too
        (nz(10, 6, 29), [nz(9, 6, 5)], WATCHING, []),  # before today's deadline, yesterday fine
        (nz(10, 6, 31), [nz(9, 6, 5)], WATCHING, ["morning_scrape:2025-06-10"]),
        (nz(10, 6, 31), [nz(10, 6, 10)], WATCHING, []),
        (nz(10, 6, 31), [nz(10, 6, 40)], WATCHING, ["morning_scrape:2025-06-10"]),  # a late success is still a miss
        (nz(10, 6, 31), [nz(9, 23, 59)], WATCHING, ["morning_scrape:2025-06-10"]),  # yesterday's run does not count
        (nz(10, 6, 31), [], nz(10, 6, 30, ), []),  # started watching at the deadline: cannot judge that window
        (nz(10, 23, 0), [nz(10, 6, 0)], WATCHING, []),
    ],
)
def test_daily_deadline(now, successes, watching, expected_keys) -> None:
    missed = missed_windows([SCRAPE], now, {"morning_scrape": successes}, watching, NZ)
    assert [m.key for m in missed] == expected_keys


@pytest.mark.parametrize(
    ("hours_since_success", "expected_period"),
    [(1, None), (24.9, None), (25.1, 1), (49.9, 1), (50.5, 2)],
)
def test_max_age_one_key_per_missed_interval(hours_since_success, expected_period) -> None:
    last = datetime(2025, 6, 10, 2, 0, tzinfo=UTC)
    now = last + timedelta(hours=hours_since_success)
    missed = missed_windows([CLEANUP], now, {"cleanup_job_runs": [last - timedelta(days=1), last]}, WATCHING, NZ)
    if expected_period is None:
        assert missed == []
    else:
        assert [m.key for m in missed] == [f"cleanup_job_runs:{last.isoformat()}:{expected_period}"]


def test_max_age_without_any_success_counts_from_watching_start() -> None:
    watching = datetime(2025, 6, 10, tzinfo=UTC)
    assert missed_windows([CLEANUP], watching + timedelta(hours=24), {}, watching, NZ) == []
    [missed] = missed_windows([CLEANUP], watching + timedelta(hours=26), {}, watching, NZ)
    assert "no success seen yet" in missed.description


def _run(tags: dict[str, str], status=dg.DagsterRunStatus.FAILURE) -> dg.DagsterRun:
    return dg.DagsterRun(job_name="morning_scrape", run_id="abc-123", tags=tags, status=status)


def test_failure_message_is_slack_compatible() -> None:
    msg = run_failure_message(
        _run({"dagster/retry_number": "2", "dagster/root_run_id": "root-1", "dagster/will_retry": "true"}), "boom"
    )
    assert set(msg) == {"text", "blocks"}
    assert msg["text"].splitlines() == [
        "Run failed: morning_scrape",
        "job `morning_scrape`, run `abc-123`",
        "error: boom",
        "retry number 2 of root run `root-1`",
        "Dagster will retry this run automatically.",
    ]
    assert msg["blocks"][0]["text"]["type"] == "mrkdwn"


def test_failure_message_prefers_the_recorded_error_tag() -> None:
    assert "error: TAB 503" in run_failure_message(_run({"racing/error": "TAB 503"}), "wrapper")["text"]


def test_partial_message_counts() -> None:
    run = _run({"racing/items_processed": "58", "racing/items_failed": "2"}, dg.DagsterRunStatus.SUCCESS)
    assert "58 items processed, 2 failed" in partial_outcome_message(run)["text"]


@pytest.mark.parametrize(("outcome", "previous", "expected"), [
    ("failed", None, Change.ALERT),  # the job's first run
    ("failed", "success", Change.ALERT),
    ("failed", "failed", Change.REPEAT),  # the outage goes on: alerted already
    ("failed", "partial", Change.ALERT),  # worse than before
    ("partial", "failed", Change.ALERT),  # a change, told
    ("partial", "partial", Change.REPEAT),
    ("partial", "success", Change.ALERT),
    ("success", "failed", Change.RECOVERED),
    ("success", "partial", Change.RECOVERED),
    ("success", "success", Change.NONE),
    ("success", None, Change.NONE),
])
def test_outcome_change_for_jobs_alerting_on_change(outcome: str, previous: str | None, expected: Change) -> None:
    assert outcome_change(outcome, previous) == expected
