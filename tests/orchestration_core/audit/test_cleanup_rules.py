"""Pure retention rules: which runs are kept and why, and the UTC cutoff."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone

import dagster as dg
import pytest

from orchestration_core.audit.cleanup import KeepReason, cleanup_cutoff, keep_reason

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
def test_cutoff_is_utc(now, days, expected) -> None:
    cutoff = cleanup_cutoff(days, now)
    assert cutoff == expected
    assert cutoff.utcoffset() == timedelta(0)


@pytest.mark.parametrize("days", [0, -1])
def test_cutoff_rejects_non_positive_days(days) -> None:
    with pytest.raises(ValueError, match="older_than_days must be at least 1"):
        cleanup_cutoff(days)


def test_cutoff_rejects_naive_now() -> None:
    with pytest.raises(ValueError, match="timezone-aware"):
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
    }
