"""bench/storage_month.py's arithmetic: how a day's runs split, autovacuum's threshold, and the summary's slopes."""

import importlib.util
import sys
from datetime import UTC, datetime

import pytest

from tests.conftest import REPO_ROOT

pytestmark = pytest.mark.unit

spec = importlib.util.spec_from_file_location("storage_month", REPO_ROOT / "bench" / "storage_month.py")
storage_month = importlib.util.module_from_spec(spec)
sys.modules[spec.name] = storage_month  # its dataclasses look their module up there while it loads
spec.loader.exec_module(storage_month)
DayPlan = storage_month.DayPlan


@pytest.mark.parametrize(
    ("runs", "share", "plan"),
    [
        (9200, 0.02, DayPlan(successes=8952, failed=129, partial=55, recoveries=64)),  # 184 problems = 2%
        (1000, 0.0, DayPlan(successes=1000, failed=0, partial=0, recoveries=0)),
        (100, 0.02, DayPlan(successes=98, failed=1, partial=1, recoveries=0)),
        (1, 0.02, DayPlan(successes=1, failed=0, partial=0, recoveries=0)),
    ],
)
def test_day_plan(runs: int, share: float, plan) -> None:
    assert storage_month.day_plan(runs, share) == plan
    assert plan.total == runs


@pytest.mark.parametrize(("runs", "share"), [(0, 0.02), (100, -0.1), (100, 0.5)])
def test_day_plan_refuses_nonsense(runs: int, share: float) -> None:
    with pytest.raises(ValueError):
        storage_month.day_plan(runs, share)


@pytest.mark.parametrize(("rows", "threshold"), [(0, 50), (1000, 250), (1_000_000, 200_050), (-1, 50)])
def test_autovacuum_threshold(rows: float, threshold: int) -> None:
    assert storage_month.autovacuum_threshold(rows) == threshold


@pytest.mark.parametrize(
    ("xs", "ys", "expected"),
    [([0, 1, 2, 3], [5, 7, 9, 11], 2.0), ([0, 1, 2], [4, 4, 4], 0.0), ([3], [9], 0.0), ([1, 1], [2, 5], 0.0),
     ([0, 1, 2, 3], [0, 1, 1, 2], 0.6)],
)
def test_slope(xs, ys, expected) -> None:
    assert storage_month.slope(xs, ys) == pytest.approx(expected)


def test_summary_of_a_month_that_plateaus() -> None:
    # 10 MB a day while nothing is deleted (1 MB of it kept on purpose), then retention removes a day a day from day 14.
    days = []
    for day in range(40):
        size = 10e6 * (day + 1) if day < 14 else 10e6 * 15 + 1e6 * (day - 14)
        days.append({"day": day, "dagster_bytes": size, "history_bytes": 2000 * (day + 1), "problem_runs": 3 * (day + 1)})
    summary = storage_month.summarize(days, retention_days=14, export_bytes_per_day=100)
    assert summary["bytes_per_day_all_runs"] == 10_000_000
    assert summary["kept_on_purpose_bytes_per_day"] == 1_000_000
    assert summary["bytes_per_day_successes_while_kept"] == 9_000_000
    assert summary["success_plateau_bytes"] == 9_000_000 * 15
    assert summary["ceiling_bytes"] == 10e6 * 15 + 1e6 * 25
    assert summary["problem_runs_per_day"] == 3.0
    assert summary["history_bytes_per_day"] == 2000
    assert summary["yearly_growth_bytes"] == {"problem_runs": 365_000_000, "execution_history": 730_000,
                                              "exports": 36_500}
    assert summary["steady_days"] == 40 - 16


def test_day_specs_spread_the_problems_and_follow_every_other_failure_with_a_recovery() -> None:
    plan = storage_month.day_plan(9200, 0.02)
    start = datetime(2026, 1, 1, tzinfo=UTC)
    specs = storage_month.day_specs(start, plan, 0.8, [0])
    assert len(specs) == plan.total
    assert sum(not s.ok for s in specs) == plan.failed
    recoveries = [s for s in specs if s.parent]
    assert len(recoveries) == plan.recoveries
    by_id = {s.run_id: s for s in specs}
    assert all(not by_id[r.parent].ok and r.ok and r.created > by_id[r.parent].created for r in recoveries)
    assert all(start < s.created < start + storage_month.DAY for s in specs)
    assert [s.created for s in specs] == sorted(s.created for s in specs)
    # the failures are spread over the day, not bunched at its start
    failed_hours = {s.created.hour for s in specs if not s.ok}
    assert len(failed_hours) >= 20
    maintenance = sum(s.task is not None for s in specs) / len(specs)
    assert 0.75 < maintenance < 0.85
    assert all(s.tags["maintenance/history_recorded"] == s.run_id for s in specs if s.task)
