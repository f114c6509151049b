"""Pure retention rules: which runs are kept and why, and the UTC cutoff."""

from __future__ import annotations

from datetime import UTC, date, datetime, timedelta, timezone

import dagster as dg
import pytest

from orchestration_core.audit.cleanup import (
    KeepReason,
    _parent_is_kept,
    cleanup_cutoff,
    failed_retention_cutoff,
    keep_reason,
    parent_run_id_of,
    reindex_due,
)
from tests.host_timezone import host_timezone

pytestmark = pytest.mark.unit
S = dg.DagsterRunStatus
PARTIAL = {"racing/outcome": "partial"}


@pytest.mark.parametrize(
    ("status", "tags", "parent_kept", "expected"),
    [
        (S.SUCCESS, {}, False, None),
        (S.SUCCESS, {"racing/outcome": "success"}, False, None),
        (S.SUCCESS, PARTIAL, False, KeepReason.PARTIAL),
        (S.SUCCESS, {"racing/outcome": "failed"}, False, KeepReason.FAILED_OUTCOME),
        (S.SUCCESS, {}, True, KeepReason.RECOVERS_KEPT_RUN),
        (S.SUCCESS, PARTIAL, True, KeepReason.PARTIAL),
        (S.FAILURE, {}, False, KeepReason.FAILED),
        (S.FAILURE, {"racing/outcome": "success"}, False, KeepReason.FAILED),
        (S.CANCELED, {}, False, KeepReason.CANCELED),
        (S.QUEUED, {}, False, KeepReason.IN_PROGRESS),
        (S.STARTED, {}, False, KeepReason.IN_PROGRESS),
        (S.STARTING, {}, False, KeepReason.IN_PROGRESS),
        (S.CANCELING, {}, False, KeepReason.IN_PROGRESS),
        (S.NOT_STARTED, {}, False, KeepReason.IN_PROGRESS),
    ],
)
def test_keep_reason(status, tags, parent_kept, expected) -> None:
    assert keep_reason(status, tags, parent_kept) == expected


@pytest.mark.parametrize(
    ("now", "days", "expected"),
    [
        (datetime(2025, 3, 20, 2, 0, tzinfo=UTC), 14, datetime(2025, 3, 6, 2, 0, tzinfo=UTC)),
        # 02:00 in Auckland (NZDT, +13) is 13:00 UTC the day before: the cutoff is expressed in UTC.
        (datetime(2025, 3, 20, 2, 0, tzinfo=timezone(timedelta(hours=13))), 14, datetime(2025, 3, 5, 13, 0, tzinfo=UTC)),
        (datetime(2025, 3, 20, tzinfo=UTC), 1, datetime(2025, 3, 19, tzinfo=UTC)),
    ],
)
@pytest.mark.parametrize("host_zone", ["UTC", "Pacific/Auckland", "America/Los_Angeles"])
def test_cutoff_is_utc(now, days, expected, host_zone) -> None:
    with host_timezone(host_zone):
        cutoff = cleanup_cutoff(days, now)
    assert cutoff == expected
    assert cutoff.utcoffset() == timedelta(0)


@pytest.mark.parametrize("host_zone", ["UTC", "Pacific/Auckland"])
def test_cutoff_without_a_time_is_that_many_days_before_now_in_utc(host_zone: str) -> None:
    with host_timezone(host_zone):
        before = datetime.now(UTC)
        cutoff = cleanup_cutoff(14)
        after = datetime.now(UTC)
    assert before - timedelta(days=14) <= cutoff <= after - timedelta(days=14)
    assert cutoff.utcoffset() == timedelta(0)


@pytest.mark.parametrize("days", [0, -1])
def test_cutoff_rejects_non_positive_days(days) -> None:
    with pytest.raises(ValueError, match="older_than_days must be at least 1"):
        cleanup_cutoff(days)


def test_cutoff_rejects_naive_now() -> None:
    with pytest.raises(ValueError, match="^now must be timezone-aware$"):
        cleanup_cutoff(14, datetime(2025, 3, 20))


def test_cleanup_schedule_runs_nightly_in_racing_timezone() -> None:
    from orchestration_core.audit.jobs import cleanup_job_runs, cleanup_job_runs_schedule
    from orchestration_core.settings import racing_timezone

    assert cleanup_job_runs_schedule.cron_schedule == "0 2 * * *"
    assert cleanup_job_runs_schedule.execution_timezone == racing_timezone()
    assert cleanup_job_runs_schedule.default_status == dg.DefaultScheduleStatus.RUNNING
    request = cleanup_job_runs_schedule.evaluate_tick(dg.build_schedule_context()).run_requests[0]
    assert dg.validate_run_config(cleanup_job_runs, request.run_config)["ops"]["prune_old_successful_runs"]["config"] == {
        "older_than_days": 14,
        "dry_run": False,
        "batch_size": 500,
        "vacuum": True,
        "reindex_every_days": 7,
    }


NOW = datetime(2026, 6, 1, 2, 0, tzinfo=UTC)
PROBLEM_CUTOFF_30 = NOW - timedelta(days=30)


@pytest.mark.parametrize(
    ("status", "tags", "parent_kept", "age_days", "expected"),
    [
        # RUN_RETENTION_FAILED_DAYS=30: problems younger than 30 days are kept, older ones are not (boundary rows)
        (S.FAILURE, {}, False, 29.99, KeepReason.FAILED),
        (S.FAILURE, {}, False, 30.01, None),
        (S.CANCELED, {}, False, 29.99, KeepReason.CANCELED),
        (S.CANCELED, {}, False, 30.01, None),
        (S.SUCCESS, PARTIAL, False, 29.99, KeepReason.PARTIAL),
        (S.SUCCESS, PARTIAL, False, 30.01, None),
        (S.SUCCESS, {"racing/outcome": "failed"}, False, 30.01, None),
        (S.SUCCESS, {"racing/outcome": "failed"}, False, 29.99, KeepReason.FAILED_OUTCOME),
        # a recovery follows its parent (parent_kept already says whether the parent outlived the cutoff)
        (S.SUCCESS, {}, True, 45, KeepReason.RECOVERS_KEPT_RUN),
        (S.SUCCESS, {}, False, 45, None),
        # what is still running never expires
        (S.STARTED, {}, False, 400, KeepReason.IN_PROGRESS),
        (S.QUEUED, {}, False, 400, KeepReason.IN_PROGRESS),
    ],
)
def test_keep_reason_by_age_with_a_failed_runs_retention(status, tags, parent_kept, age_days, expected) -> None:
    created = NOW - timedelta(days=age_days)
    assert keep_reason(status, tags, parent_kept, created_at=created, problem_cutoff=PROBLEM_CUTOFF_30) == expected


@pytest.mark.parametrize("age_days", [15, 400, 4000])
def test_without_a_failed_runs_retention_problems_are_kept_at_any_age(age_days: int) -> None:
    created = NOW - timedelta(days=age_days)
    assert keep_reason(S.FAILURE, {}, False, created_at=created, problem_cutoff=None) == KeepReason.FAILED
    assert keep_reason(S.SUCCESS, PARTIAL, False, created_at=created, problem_cutoff=None) == KeepReason.PARTIAL


@pytest.mark.parametrize("host_zone", ["UTC", "Pacific/Auckland", "America/Los_Angeles"])
@pytest.mark.parametrize(("minutes", "expected"), [(-1, None), (1, KeepReason.FAILED)])
def test_a_naive_creation_time_is_read_as_utc_whatever_the_hosts_zone(host_zone, minutes, expected) -> None:
    created = (PROBLEM_CUTOFF_30 + timedelta(minutes=minutes)).replace(tzinfo=None)
    with host_timezone(host_zone):
        assert keep_reason(S.FAILURE, {}, False, created_at=created, problem_cutoff=PROBLEM_CUTOFF_30) == expected


@pytest.mark.parametrize(("minutes", "expected"), [(-1, None), (1, KeepReason.FAILED)])
def test_a_creation_time_in_another_zone_is_compared_as_the_same_instant(minutes: int, expected) -> None:
    auckland = timezone(timedelta(hours=13))
    created = (PROBLEM_CUTOFF_30 + timedelta(minutes=minutes)).astimezone(auckland)
    assert keep_reason(S.FAILURE, {}, False, created_at=created, problem_cutoff=PROBLEM_CUTOFF_30) == expected


def test_a_problem_created_exactly_at_the_failed_runs_cutoff_is_still_kept() -> None:
    assert keep_reason(S.FAILURE, {}, False, created_at=PROBLEM_CUTOFF_30,
                       problem_cutoff=PROBLEM_CUTOFF_30) == KeepReason.FAILED


@pytest.mark.parametrize(
    ("parent_run_id", "tags", "expected"),
    [
        ("P1", {}, "P1"),  # re-executed through the API: the field
        (None, {"dagster/parent_run_id": "P2"}, "P2"),  # the daemon's retry and the UI: the tag
        ("P1", {"dagster/parent_run_id": "P1"}, "P1"),
        (None, {}, None),  # a first run
    ],
)
def test_the_run_a_re_execution_recovers(parent_run_id, tags, expected) -> None:
    run = dg.DagsterRun(job_name="morning_scrape", run_id="R", parent_run_id=parent_run_id,
                        root_run_id=parent_run_id, tags=tags)
    assert parent_run_id_of(run) == expected


def parent_record(status: dg.DagsterRunStatus, tags: dict[str, str], age_days: float) -> dg.RunRecord:
    created = NOW - timedelta(days=age_days)
    run = dg.DagsterRun(job_name="morning_scrape", run_id="PARENT", status=status, tags=tags)
    return dg.RunRecord(storage_id=1, dagster_run=run, create_timestamp=created, update_timestamp=created)


@pytest.mark.parametrize(
    ("status", "tags", "age_days", "problem_cutoff", "kept"),
    [
        (S.FAILURE, {}, 45, None, True),  # a recovery goes with the failed run it recovers
        (S.CANCELED, {}, 45, None, True),
        (S.SUCCESS, PARTIAL, 45, None, True),
        (S.SUCCESS, {"racing/outcome": "failed"}, 45, None, True),
        (S.SUCCESS, {}, 45, None, False),  # a clean success documents nothing
        (S.SUCCESS, {"racing/outcome": "success"}, 45, None, False),
        (S.FAILURE, {}, 29.99, PROBLEM_CUTOFF_30, True),  # the failed run is still kept, so is its recovery
        (S.FAILURE, {}, 30.01, PROBLEM_CUTOFF_30, False),  # past RUN_RETENTION_FAILED_DAYS: both go
        (S.SUCCESS, PARTIAL, 30.01, PROBLEM_CUTOFF_30, False),
    ],
)
def test_a_recovery_is_kept_while_the_run_it_recovers_is(status, tags, age_days, problem_cutoff, kept) -> None:
    assert _parent_is_kept(parent_record(status, tags, age_days), problem_cutoff) is kept


def test_a_recovery_of_a_recovery_is_not_kept_for_it() -> None:
    """A parent kept only because it recovers a kept run does not keep its own re-execution: the chain ends at the
    success that recovered the failure."""
    parent = parent_record(S.SUCCESS, {"dagster/parent_run_id": "FAILED"}, 45)
    assert _parent_is_kept(parent, None) is False


def test_a_run_without_a_parent_recovers_nothing() -> None:
    assert _parent_is_kept(None, PROBLEM_CUTOFF_30) is False


@pytest.mark.parametrize(
    ("success_days", "failed_days", "expected"),
    [(14, None, None), (14, 14, NOW - timedelta(days=14)), (14, 90, NOW - timedelta(days=90)),
     (30, 30, NOW - timedelta(days=30))],
)
def test_failed_retention_cutoff(success_days, failed_days, expected) -> None:
    assert failed_retention_cutoff(success_days, failed_days, NOW) == expected


@pytest.mark.parametrize(("success_days", "failed_days"), [(14, 13), (30, 29), (14, 1)])
def test_failed_retention_shorter_than_the_successes_is_refused(success_days, failed_days) -> None:
    with pytest.raises(ValueError, match="failed runs are the audit trail"):
        failed_retention_cutoff(success_days, failed_days, NOW)


@pytest.mark.parametrize(
    ("day", "every", "due"),
    [
        (date(2026, 12, 6), 7, True),  # a Sunday: ordinal 739956, divisible by 7
        (date(2026, 12, 7), 7, False),
        (date(2026, 12, 12), 7, False),
        (date(2026, 12, 13), 7, True),
        (date(2026, 12, 7), 1, True),
        (date(2026, 12, 6), 0, False),
    ],
)
def test_reindex_due(day: date, every: int, due: bool) -> None:
    assert reindex_due(day, every) is due


def test_reindex_due_once_in_every_period() -> None:
    start = date(2026, 1, 1)
    assert sum(reindex_due(start + timedelta(days=i), 7) for i in range(70)) == 10


def test_reindex_due_refuses_a_negative_period() -> None:
    with pytest.raises(ValueError, match="reindex_every_days"):
        reindex_due(date(2026, 1, 1), -1)
