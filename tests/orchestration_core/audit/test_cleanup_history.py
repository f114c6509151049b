"""Retention and the maintenance execution history: a maintenance run whose summary is not recorded is never deleted
(whatever its age), and the history itself is pruned by the same nightly job after MAINTENANCE_HISTORY_DAYS."""

from __future__ import annotations

import datetime as dt

import dagster as dg
import pytest
import sqlalchemy as sa

from maintenance_jobs.database.tables import dispatch_skips, task_executions
from orchestration_core.audit.cleanup import history_unrecorded, prune_successful_runs
from orchestration_core.audit.execution_history import TAG_HISTORY_RECORDED, prune_execution_history
from orchestration_core.audit.jobs import cleanup_job_runs
from tests.orchestration_core.audit.run_factory import RunFactory

S = dg.DagsterRunStatus
NOW = dt.datetime.now(dt.UTC)
KIND = {"orchestration/kind": "maintenance"}
IN_PROCESS = {"execution": {"config": {"in_process": {}}}}


@pytest.mark.unit
@pytest.mark.parametrize(
    ("tags", "expected"),
    [
        ({}, False),  # not a maintenance run
        (KIND, True),  # never recorded
        (KIND | {TAG_HISTORY_RECORDED: "RUN"}, False),  # recorded
        (KIND | {TAG_HISTORY_RECORDED: "PARENT"}, True),  # a retry that copied its parent's tags
        ({"maintenance/task": "t", TAG_HISTORY_RECORDED: "OTHER"}, False),  # task tag alone: not a maintenance job
    ],
)
def test_history_unrecorded(tags: dict[str, str], expected: bool) -> None:
    run = dg.DagsterRun(job_name="example_executor", run_id="RUN", tags=tags)
    assert history_unrecorded(run) is expected


@pytest.mark.integration
def test_old_maintenance_runs_not_in_the_history_are_kept(pg_instance: dg.DagsterInstance) -> None:
    factory = RunFactory(pg_instance)
    task = KIND | {"maintenance/task": "nightly"}

    def old_success(tags: dict[str, str]) -> str:
        return factory.recorded(S.SUCCESS, tags=tags, age_days=30).run_id

    unrecorded = old_success(task)
    recorded = factory.recorded(S.SUCCESS, tags=task, age_days=30)
    pg_instance.add_run_tags(recorded.run_id, {TAG_HISTORY_RECORDED: recorded.run_id})
    copied = old_success(task | {TAG_HISTORY_RECORDED: recorded.run_id})  # a retry created after its parent's record
    racing = old_success({"orchestration/kind": "racing"})
    newest = factory.recorded(S.SUCCESS, tags=task)  # the task's latest success: the old ones are not its latest
    factory.recorded(S.SUCCESS)  # nor the job's

    report = prune_successful_runs(pg_instance, 14)

    remaining = {r.run_id for r in pg_instance.get_runs()}
    assert {unrecorded, copied, newest.run_id} <= remaining
    assert not {recorded.run_id, racing} & remaining
    assert report.kept["history_unrecorded"] == 2 and report.deleted == 2
    # Once recorded (the backfill pass tags it), the next night deletes it.
    pg_instance.add_run_tags(unrecorded, {TAG_HISTORY_RECORDED: unrecorded})
    assert prune_successful_runs(pg_instance, 14).deleted == 1 and not pg_instance.has_run(unrecorded)


def history_row(run_id: str, triggered_at: dt.datetime, id_: int) -> dict:
    return {"id": id_, "run_id": run_id, "task_name": "nightly", "status": "success", "triggered_at": triggered_at,
            "job_name": "example_executor", "dagster_status": "SUCCESS"}


@pytest.fixture
def history_rows(registry_url: str) -> sa.Engine:
    """Three history rows (100, 31 and 29 days old) and two dispatcher skips (ending 40 and 5 days ago)."""
    engine = sa.create_engine(registry_url)
    with engine.begin() as conn:
        conn.execute(sa.insert(task_executions), [history_row(f"r{age}", NOW - dt.timedelta(days=age), age)
                                                  for age in (100, 31, 29)])
        conn.execute(sa.insert(dispatch_skips), [
            {"skipped_from": NOW - dt.timedelta(days=age, hours=3), "skipped_until": NOW - dt.timedelta(days=age),
             "reason": "downtime"} for age in (40, 5)])
    yield engine
    engine.dispose()


def remaining_runs(engine: sa.Engine) -> list[str]:
    with engine.connect() as conn:
        return sorted(conn.execute(sa.select(task_executions.c.run_id)).scalars())


def skip_count(engine: sa.Engine) -> int:
    with engine.connect() as conn:
        return conn.execute(sa.select(sa.func.count()).select_from(dispatch_skips)).scalar()


@pytest.mark.integration
def test_history_rows_older_than_the_setting_are_pruned(registry_url: str, history_rows: sa.Engine) -> None:
    report = prune_execution_history(registry_url, 30, now=NOW)
    assert (report.executions_deleted, report.skips_deleted) == (2, 1)
    assert remaining_runs(history_rows) == ["r29"] and skip_count(history_rows) == 1
    assert prune_execution_history(registry_url, 30, now=NOW).executions_deleted == 0
    with pytest.raises(ValueError, match="MAINTENANCE_HISTORY_DAYS"):
        prune_execution_history(registry_url, 0)


@pytest.mark.integration
@pytest.mark.parametrize(("days", "dry_run", "left"), [(None, False, ["r100", "r29", "r31"]),
                                                       ("30", True, ["r100", "r29", "r31"]),
                                                       ("30", False, ["r29"])])
def test_the_nightly_cleanup_job_prunes_the_history_when_set(
    pg_instance: dg.DagsterInstance, registry_url: str, history_rows: sa.Engine, monkeypatch: pytest.MonkeyPatch,
    days: str | None, dry_run: bool, left: list[str],
) -> None:
    monkeypatch.setenv("MAINTENANCE_DATABASE_URL", registry_url)
    if days:
        monkeypatch.setenv("MAINTENANCE_HISTORY_DAYS", days)
    else:
        monkeypatch.delenv("MAINTENANCE_HISTORY_DAYS", raising=False)
    config = IN_PROCESS | {"ops": {"prune_old_successful_runs": {"config": {"dry_run": dry_run}}}}
    result = cleanup_job_runs.execute_in_process(instance=pg_instance, run_config=config)
    assert result.success and remaining_runs(history_rows) == left
    metadata = result.output_for_node("prune_old_successful_runs")
    assert metadata.get("history_rows_deleted") == (2 if left == ["r29"] else None)


@pytest.mark.integration
def test_the_cleanup_job_fails_loudly_when_the_history_cannot_be_reached(
    pg_instance: dg.DagsterInstance, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("MAINTENANCE_HISTORY_DAYS", "30")
    monkeypatch.delenv("MAINTENANCE_DATABASE_URL", raising=False)
    result = cleanup_job_runs.execute_in_process(instance=pg_instance, run_config=IN_PROCESS, raise_on_error=False)
    assert not result.success
    failure = result.get_step_failure_events()[0].step_failure_data
    assert "MAINTENANCE_DATABASE_URL is not" in failure.user_failure_data.description
