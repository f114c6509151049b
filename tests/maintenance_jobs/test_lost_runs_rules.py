"""The guard's decision for a failed maintenance run (maintenance_jobs/lost_runs.py), pure."""

from __future__ import annotations

import datetime as dt

import pytest

from maintenance_jobs.lost_runs import DeadRun, TaskState, Verdict, decide
from maintenance_jobs.tags import TAG_RELAUNCH_NUMBER

pytestmark = pytest.mark.unit

MINUTE = dt.datetime(2025, 6, 2, 15, 5, tzinfo=dt.UTC)
WILL_RETRY, RETRY_OF = "dagster/will_retry", "dagster/auto_retry_run_id"


def dead(**overrides) -> DeadRun:
    fields = {"run_id": "r1", "task_name": "t", "tags": {}, "ended_at": MINUTE, "op_reported_failure": False,
              "hit_max_runtime": False, "op_started": False}
    return DeadRun(**(fields | overrides))


ENABLED = TaskState(True, True, 0)


@pytest.mark.parametrize(("run", "task", "now", "expected"), [
    (dead(op_reported_failure=True), ENABLED, MINUTE, Verdict.TASK_FAILURE),
    (dead(hit_max_runtime=True), ENABLED, MINUTE, Verdict.TASK_FAILURE),
    # Decided only once Dagster's own decision is final, so its retry never inherits the verdict tag.
    (dead(op_reported_failure=True, tags={WILL_RETRY: "true"}), ENABLED, MINUTE, Verdict.WAIT),
    (dead(op_reported_failure=True, tags={WILL_RETRY: "true", RETRY_OF: "r2"}), ENABLED, MINUTE, Verdict.TASK_FAILURE),
    (dead(tags={WILL_RETRY: "true"}), ENABLED, MINUTE + dt.timedelta(minutes=4, seconds=59), Verdict.WAIT),
    (dead(tags={WILL_RETRY: "true", RETRY_OF: "r2"}), ENABLED, MINUTE, Verdict.DAGSTER_RETRIED),
    # Dagster promised a retry that never came (its daemon down or failing, or its consumer read past the failure
    # before the run's status and tag were written): the guard makes that retry, for a task failure too.
    (dead(tags={WILL_RETRY: "true"}), ENABLED, MINUTE + dt.timedelta(minutes=5), Verdict.RETRIED),
    (dead(op_reported_failure=True, tags={WILL_RETRY: "true"}), ENABLED, MINUTE + dt.timedelta(minutes=5),
     Verdict.RETRIED),
    (dead(tags={WILL_RETRY: "true"}, retry_dropped=True), ENABLED, MINUTE, Verdict.RETRIED),
    (dead(op_reported_failure=True, tags={WILL_RETRY: "true"}, retry_dropped=True), ENABLED, MINUTE,
     Verdict.RETRIED),
    (dead(tags={WILL_RETRY: "true"}, ended_at=None), ENABLED, MINUTE + dt.timedelta(days=1), Verdict.WAIT),
    (dead(tags={WILL_RETRY: "true", RETRY_OF: "r2"}, retry_dropped=True), ENABLED, MINUTE, Verdict.DAGSTER_RETRIED),
    (dead(tags={WILL_RETRY: "false"}, retry_dropped=True), ENABLED, MINUTE, Verdict.RELAUNCH),  # as without it
    # ... but not for a task disabled or deleted since: a death is reported, a task failure left to the task.
    (dead(tags={WILL_RETRY: "true"}, retry_dropped=True), TaskState(True, False, 3), MINUTE, Verdict.REPORT),
    (dead(tags={WILL_RETRY: "true"}, retry_dropped=True), TaskState(False), MINUTE, Verdict.REPORT),
    (dead(op_reported_failure=True, tags={WILL_RETRY: "true"}, retry_dropped=True), TaskState(True, False, 3),
     MINUTE, Verdict.TASK_FAILURE),
    (dead(tags={WILL_RETRY: "false"}), ENABLED, MINUTE, Verdict.RELAUNCH),  # never reached its op: safe to repeat
    (dead(op_started=True), ENABLED, MINUTE, Verdict.REPORT),  # mid-run, and the task allows no repeat
    (dead(op_started=True), TaskState(True, True, 1), MINUTE, Verdict.RELAUNCH),
    (dead(tags={TAG_RELAUNCH_NUMBER: "1"}), ENABLED, MINUTE, Verdict.RELAUNCH),
    (dead(tags={TAG_RELAUNCH_NUMBER: "2"}), ENABLED, MINUTE, Verdict.REPORT),  # the bound
    (dead(tags={TAG_RELAUNCH_NUMBER: "two"}), ENABLED, MINUTE, Verdict.REPORT),  # edited by hand: no more re-launches
    (dead(), TaskState(True, False, 3), MINUTE, Verdict.REPORT),  # disabled since
    (dead(), TaskState(False), MINUTE, Verdict.REPORT),  # deleted since
])
def test_decide(run: DeadRun, task: TaskState, now: dt.datetime, expected: Verdict) -> None:
    decision = decide(run, task, now)
    assert decision.verdict == expected
    assert decision.reason or expected == Verdict.TASK_FAILURE


@pytest.mark.parametrize(("run", "task", "expected"), [
    (dead(op_started=True), ENABLED, Verdict.SUPERSEDED),  # would be reported without the later run
    (dead(), ENABLED, Verdict.SUPERSEDED),  # would be re-launched
    (dead(tags={TAG_RELAUNCH_NUMBER: "2"}), ENABLED, Verdict.SUPERSEDED),  # past the bound: still covered
    (dead(), TaskState(False), Verdict.SUPERSEDED),
    # Dagster's own verdicts come first: its retry is this run's chain, not a later run.
    (dead(tags={WILL_RETRY: "true"}), ENABLED, Verdict.WAIT),
    (dead(tags={WILL_RETRY: "true", RETRY_OF: "r2"}), ENABLED, Verdict.DAGSTER_RETRIED),
    (dead(op_reported_failure=True), ENABLED, Verdict.TASK_FAILURE),
])
def test_a_later_run_of_the_task_supersedes_a_lost_one(run: DeadRun, task: TaskState, expected: Verdict) -> None:
    decision = decide(run, task, MINUTE, newer_run="r9")
    assert decision.verdict == expected
    if expected == Verdict.SUPERSEDED:
        assert "r9" in decision.reason
