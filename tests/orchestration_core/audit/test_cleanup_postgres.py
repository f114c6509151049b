"""The cleanup against Postgres: exactly the old, plain successful runs go, with their events and compute-log files."""

from __future__ import annotations

import time
from datetime import UTC, datetime, timedelta

import dagster as dg
import pytest

from orchestration_core.audit.bulk_delete import InstanceRunDeleter, SqlBulkRunDeleter, run_deleter_for
from orchestration_core.audit.cleanup import prune_successful_runs
from orchestration_core.audit.jobs import cleanup_job_runs, cleanup_job_runs_schedule
from tests.orchestration_core.audit.run_factory import RunFactory, compute_log_dir, event_count, partial_tags

pytestmark = pytest.mark.integration
S = dg.DagsterRunStatus
IN_PROCESS = {"execution": {"config": {"in_process": {}}}}  # no subprocesses: faster on a shared machine


def _mixed_runs(factory: RunFactory) -> tuple[dict[str, dg.DagsterRun], set[str]]:
    """A named set of runs and the ids the cleanup must delete."""
    runs: dict[str, dg.DagsterRun] = {}
    runs["old_success_logs"] = factory.executed(age_days=20)
    runs["old_success_logs_2"] = factory.executed(age_days=15)
    runs["old_failure_logs"] = factory.executed(succeed=False, age_days=20)
    runs["new_success_logs"] = factory.executed(age_days=1)
    runs["old_success"] = factory.recorded(S.SUCCESS, age_days=30)
    runs["old_partial"] = factory.recorded(S.SUCCESS, tags=partial_tags(), age_days=30)
    runs["old_canceled"] = factory.recorded(S.CANCELED, age_days=30)
    runs["old_queued"] = factory.recorded(S.QUEUED, age_days=30)
    runs["old_started"] = factory.recorded(S.STARTED, age_days=30)
    runs["old_failed"] = factory.recorded(S.FAILURE, age_days=25)
    runs["recovery"] = factory.recorded(S.SUCCESS, parent=runs["old_failed"], age_days=24)
    runs["rerun_of_success"] = factory.recorded(S.SUCCESS, parent=runs["old_success"], age_days=29)
    runs["edge_13d"] = factory.recorded(S.SUCCESS, age_days=13.9)
    doomed = {runs[k].run_id for k in ("old_success_logs", "old_success_logs_2", "old_success", "rerun_of_success")}
    return runs, doomed


def test_deletes_exactly_old_plain_successes_with_events_and_logs(pg_instance: dg.DagsterInstance) -> None:
    assert isinstance(run_deleter_for(pg_instance), SqlBulkRunDeleter)
    runs, doomed = _mixed_runs(RunFactory(pg_instance))
    for key in ("old_success_logs", "old_failure_logs", "new_success_logs"):
        assert any(compute_log_dir(pg_instance, runs[key].run_id).rglob("*.out")), key
    events_before = {r.run_id: event_count(pg_instance, r.run_id) for r in runs.values()}
    assert all(events_before[i] > 0 for i in doomed)

    report = prune_successful_runs(pg_instance, 14, batch_size=2)  # tiny batches exercise the cursor

    remaining = {r.run_id for r in pg_instance.get_runs()}
    assert remaining == {r.run_id for r in runs.values()} - doomed
    for run_id in doomed:
        assert event_count(pg_instance, run_id) == 0
        assert not compute_log_dir(pg_instance, run_id).exists()
    for run_id in remaining:
        assert event_count(pg_instance, run_id) == events_before[run_id], run_id
    assert compute_log_dir(pg_instance, runs["old_failure_logs"].run_id).exists()
    assert compute_log_dir(pg_instance, runs["new_success_logs"].run_id).exists()
    assert report.deleted == 4
    assert report.kept == {
        "canceled": 1,
        "failed": 2,
        "in_progress": 2,
        "newer_than_cutoff": 2,
        "partial": 1,
        "recovers_kept_run": 1,
    }


def test_run_tags_of_deleted_runs_are_gone(pg_instance: dg.DagsterInstance) -> None:
    factory = RunFactory(pg_instance)
    old = factory.recorded(S.SUCCESS, tags={"racing/race_id": "R-old"}, age_days=20)
    factory.recorded(S.SUCCESS, tags={"racing/race_id": "R-new"}, age_days=1)
    prune_successful_runs(pg_instance, 14)
    assert pg_instance.get_run_by_id(old.run_id) is None
    values = {v for key, vals in pg_instance.get_run_tags(tag_keys=["racing/race_id"]) for v in vals}
    assert values == {"R-new"}


def test_dry_run_deletes_nothing_and_counts(pg_instance: dg.DagsterInstance) -> None:
    runs, doomed = _mixed_runs(RunFactory(pg_instance))
    report = prune_successful_runs(pg_instance, 14, dry_run=True, batch_size=3)
    assert {r.run_id for r in pg_instance.get_runs()} == {r.run_id for r in runs.values()}
    assert all(compute_log_dir(pg_instance, runs[k].run_id).exists() for k in ("old_success_logs", "old_success_logs_2"))
    assert report.deleted == 0
    assert report.would_delete == len(doomed)


def test_bulk_and_serial_deleters_agree(pg_instance: dg.DagsterInstance) -> None:
    factory = RunFactory(pg_instance)
    a = [factory.executed(age_days=20).run_id for _ in range(2)]
    keep = factory.executed(age_days=1).run_id
    InstanceRunDeleter(pg_instance).delete([a[0]])
    SqlBulkRunDeleter(pg_instance).delete([a[1]])
    for run_id in a:
        assert pg_instance.get_run_by_id(run_id) is None
        assert event_count(pg_instance, run_id) == 0
        assert not compute_log_dir(pg_instance, run_id).exists()
    assert pg_instance.get_run_by_id(keep) is not None


def test_cleanup_is_idempotent(pg_instance: dg.DagsterInstance) -> None:
    factory = RunFactory(pg_instance)
    failed = factory.recorded(S.FAILURE, age_days=20)
    factory.recorded(S.SUCCESS, parent=failed, age_days=20)
    doomed = {factory.recorded(S.SUCCESS, age_days=20).run_id for _ in range(2)}
    factory.recorded(S.SUCCESS, age_days=1)  # the job's latest success: the old ones may go
    first = prune_successful_runs(pg_instance, 14)
    second = prune_successful_runs(pg_instance, 14)
    assert first.deleted == len(doomed)
    assert second.deleted == 0
    assert second.kept == first.kept


def test_real_reexecution_of_failed_run_is_kept(pg_instance: dg.DagsterInstance, tmp_path, monkeypatch) -> None:
    """A recovery made by Dagster's own re-execution (execute_job from failure) survives with its failed parent."""
    from tests.orchestration_core.audit import run_factory

    monkeypatch.setenv(run_factory.FLAG_ENV, str(tmp_path / "flag"))
    job = dg.reconstructable(run_factory.audit_flaky_job)
    failed = dg.execute_job(job, instance=pg_instance, run_config=IN_PROCESS)
    assert not failed.success
    (tmp_path / "flag").touch()
    options = dg.ReexecutionOptions.from_failure(failed.run_id, pg_instance)
    recovered = dg.execute_job(job, pg_instance, run_config=IN_PROCESS, reexecution_options=options)
    assert recovered.success
    factory = RunFactory(pg_instance)
    factory.backdate(failed.run_id, 20)
    factory.backdate(recovered.run_id, 20)
    plain = factory.executed(age_days=20).run_id
    recent = factory.recorded(S.SUCCESS, age_days=1).run_id  # the sample job's latest success: `plain` may go

    report = prune_successful_runs(pg_instance, 14)

    assert {r.run_id for r in pg_instance.get_runs()} == {failed.run_id, recovered.run_id, recent}
    assert pg_instance.get_run_by_id(plain) is None
    assert report.kept["recovers_kept_run"] == 1


def test_job_reports_metadata_and_outcome(pg_instance: dg.DagsterInstance) -> None:
    runs, doomed = _mixed_runs(RunFactory(pg_instance))
    started = time.perf_counter()
    result = cleanup_job_runs.execute_in_process(
        instance=pg_instance, run_config={"ops": {"prune_old_successful_runs": {"config": {"batch_size": 2}}}}
    )
    elapsed = time.perf_counter() - started
    assert result.success
    [materialized] = [
        e for e in result.all_events if e.event_type == dg.DagsterEventType.STEP_OUTPUT
    ]
    metadata = materialized.event_specific_data.metadata
    assert metadata["deleted"].value == len(doomed)
    assert metadata["kept_by_reason"].value["partial"] == 1
    assert metadata["dry_run"].value is False
    # The pruning's own time (rounded to ms): some of the run's, never none of it (7 batches of queries and deletes).
    assert 0 < metadata["duration_seconds"].value <= elapsed
    tags = pg_instance.get_run_by_id(result.run_id).tags
    assert tags["racing/outcome"] == "success"
    assert tags["racing/items_processed"] == str(len(doomed))


def test_the_nightly_schedule_deletes_successes_older_than_14_days_and_keeps_younger_ones(
    pg_instance: dg.DagsterInstance,
) -> None:
    """The retention the schedule runs with (no config: the job's default) is 14 days, the old scheduler's
    SUCCESSFUL_JOBS retention: a run just over it goes, one just under it stays."""
    factory = RunFactory(pg_instance)
    over = factory.recorded(S.SUCCESS, age_days=14.05).run_id  # 72 min past the 14 days
    under = factory.recorded(S.SUCCESS, age_days=13.95).run_id
    factory.recorded(S.SUCCESS)  # the job's latest success: neither row above is kept for being the newest
    with dg.build_schedule_context(instance=pg_instance) as context:
        [request] = cleanup_job_runs_schedule.evaluate_tick(context).run_requests
    before = datetime.now(UTC)
    result = cleanup_job_runs.execute_in_process(instance=pg_instance, run_config=request.run_config)
    after = datetime.now(UTC)
    assert result.success
    report = result.output_for_node("prune_old_successful_runs")
    assert before - timedelta(days=14) <= datetime.fromisoformat(report["cutoff"]) <= after - timedelta(days=14)
    assert report["deleted"] == 1
    assert pg_instance.get_run_by_id(over) is None
    assert pg_instance.get_run_by_id(under) is not None


def test_bad_input_is_rejected_before_anything_is_deleted(pg_instance: dg.DagsterInstance) -> None:
    run = RunFactory(pg_instance).recorded(S.SUCCESS, age_days=30)
    with pytest.raises(ValueError, match="older_than_days"):
        prune_successful_runs(pg_instance, 0)
    with pytest.raises(ValueError, match="batch_size"):
        prune_successful_runs(pg_instance, 14, batch_size=0)
    assert pg_instance.get_run_by_id(run.run_id) is not None


def test_the_latest_success_of_every_job_and_maintenance_task_is_kept_whatever_its_age(
    pg_instance: dg.DagsterInstance,
) -> None:
    """A monthly doc sync's only success, 40+ days old, survives; so does each task's, and a job's newest old one."""
    from tests.orchestration_core.audit.run_factory import audit_step_retry_job, doc_sync_stand_in

    factory = RunFactory(pg_instance)
    fastapi, ollama = {"maintenance/task": "sync_fastapi_docs_monthly"}, {"maintenance/task": "sync_ollama_docs_monthly"}

    def doc_sync(status: dg.DagsterRunStatus, tags: dict[str, str], age_days: float) -> str:
        return factory.recorded(status, tags=tags, age_days=age_days, job=doc_sync_stand_in).run_id

    older_fastapi = doc_sync(S.SUCCESS, fastapi, 70)
    latest_fastapi = doc_sync(S.SUCCESS, fastapi, 40)
    doc_sync(S.FAILURE, fastapi, 9)  # a newer failure does not make the old success deletable
    latest_ollama = doc_sync(S.SUCCESS, ollama, 45)  # older than fastapi's: kept as its task's latest
    older_sample = factory.recorded(S.SUCCESS, age_days=30).run_id
    latest_sample = factory.recorded(S.SUCCESS, age_days=20).run_id  # a job with no recent success keeps its newest
    old_retry_job = factory.recorded(S.SUCCESS, age_days=20, job=audit_step_retry_job).run_id
    factory.recorded(S.SUCCESS, age_days=1, job=audit_step_retry_job)  # ... unless a newer success exists

    report = prune_successful_runs(pg_instance, 14, batch_size=2)

    remaining = {r.run_id for r in pg_instance.get_runs()}
    assert {latest_fastapi, latest_ollama, latest_sample} <= remaining
    assert not {older_fastapi, older_sample, old_retry_job} & remaining
    assert report.deleted == 3
    assert report.kept["latest_success"] == 3
    assert prune_successful_runs(pg_instance, 14).deleted == 0  # and the next night keeps them too
