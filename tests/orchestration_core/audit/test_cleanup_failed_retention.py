"""RUN_RETENTION_FAILED_DAYS against Postgres: failed, canceled and partial runs past it go with the recoveries that
followed them; younger ones, runs missing from the execution history and each job's latest success stay. And the
VACUUM (ANALYZE) after a cleanup: the dead rows it leaves are gone from pg_stat_user_tables."""

from __future__ import annotations

import time
from collections.abc import Iterator

import dagster as dg
import pytest
import sqlalchemy as sa

from orchestration_core.audit.bulk_delete import vacuum_after_delete
from orchestration_core.audit.cleanup import prune_successful_runs
from orchestration_core.audit.jobs import cleanup_job_runs
from orchestration_core.run_outcome import KIND_MAINTENANCE, TAG_KIND, TAG_MAINTENANCE_TASK
from tests.orchestration_core.audit.run_factory import RunFactory, event_count, partial_tags

pytestmark = pytest.mark.integration
S = dg.DagsterRunStatus


def _problem_runs(factory: RunFactory) -> tuple[dict[str, dg.DagsterRun], set[str]]:
    runs: dict[str, dg.DagsterRun] = {}
    runs["failed_40"] = factory.recorded(S.FAILURE, age_days=40)
    runs["recovery_of_failed_40"] = factory.recorded(S.SUCCESS, parent=runs["failed_40"], age_days=39.9)
    runs["canceled_40"] = factory.recorded(S.CANCELED, age_days=40)
    runs["partial_31"] = factory.recorded(S.SUCCESS, tags=partial_tags(), age_days=30.1)
    runs["failed_29"] = factory.recorded(S.FAILURE, age_days=29.9)
    runs["recovery_of_failed_29"] = factory.recorded(S.SUCCESS, parent=runs["failed_29"], age_days=29.8)
    runs["partial_29"] = factory.recorded(S.SUCCESS, tags=partial_tags(), age_days=29.9)
    runs["canceled_20"] = factory.recorded(S.CANCELED, age_days=20)
    # a maintenance run whose summary is not in the execution history: kept whatever its age and status
    runs["unrecorded_failed_60"] = factory.recorded(
        S.FAILURE, tags={TAG_KIND: KIND_MAINTENANCE, TAG_MAINTENANCE_TASK: "nightly_backup"}, age_days=60)
    runs["latest_success"] = factory.recorded(S.SUCCESS, age_days=1)
    doomed = {runs[k].run_id for k in ("failed_40", "recovery_of_failed_40", "canceled_40", "partial_31")}
    return runs, doomed


def test_failed_runs_past_their_retention_go_with_their_recoveries(pg_instance: dg.DagsterInstance) -> None:
    runs, doomed = _problem_runs(RunFactory(pg_instance))
    assert all(event_count(pg_instance, run_id) > 0 for run_id in doomed)

    report = prune_successful_runs(pg_instance, 14, failed_older_than_days=30, batch_size=2)

    remaining = {r.run_id for r in pg_instance.get_runs()}
    assert remaining == {r.run_id for r in runs.values()} - doomed
    assert all(event_count(pg_instance, run_id) == 0 for run_id in doomed)
    assert report.deleted == 4
    assert report.deleted_problems == 3  # the recovery is a success
    assert report.kept == {"canceled": 1, "failed": 1, "history_unrecorded": 1, "newer_than_cutoff": 1, "partial": 1,
                           "recovers_kept_run": 1}


def test_unset_keeps_every_problem_run_whatever_its_age(pg_instance: dg.DagsterInstance) -> None:
    runs, _ = _problem_runs(RunFactory(pg_instance))
    report = prune_successful_runs(pg_instance, 14)
    assert {r.run_id for r in pg_instance.get_runs()} == {r.run_id for r in runs.values()}
    assert report.deleted == 0 and report.problem_cutoff is None


def test_a_retention_shorter_than_the_successes_deletes_nothing(pg_instance: dg.DagsterInstance) -> None:
    runs, _ = _problem_runs(RunFactory(pg_instance))
    with pytest.raises(ValueError, match="shorter than the successes"):
        prune_successful_runs(pg_instance, 30, failed_older_than_days=20)
    assert len(pg_instance.get_runs()) == len(runs)


@pytest.mark.parametrize(("setting", "failed_40_kept"), [(None, True), ("30", False), ("45", True)])
def test_the_nightly_job_reads_the_setting(pg_instance: dg.DagsterInstance, monkeypatch: pytest.MonkeyPatch,
                                           setting: str | None, failed_40_kept: bool) -> None:
    runs, _ = _problem_runs(RunFactory(pg_instance))
    if setting is None:
        monkeypatch.delenv("RUN_RETENTION_FAILED_DAYS", raising=False)
    else:
        monkeypatch.setenv("RUN_RETENTION_FAILED_DAYS", setting)
    result = cleanup_job_runs.execute_in_process(instance=pg_instance)
    assert result.success
    assert (pg_instance.get_run_by_id(runs["failed_40"].run_id) is not None) is failed_40_kept
    assert (pg_instance.get_run_by_id(runs["recovery_of_failed_40"].run_id) is not None) is failed_40_kept


def test_the_nightly_job_refuses_a_setting_below_the_success_retention(
    pg_instance: dg.DagsterInstance, monkeypatch: pytest.MonkeyPatch
) -> None:
    runs, _ = _problem_runs(RunFactory(pg_instance))
    monkeypatch.setenv("RUN_RETENTION_FAILED_DAYS", "13")
    result = cleanup_job_runs.execute_in_process(instance=pg_instance, raise_on_error=False)
    assert not result.success
    failure = next(e for e in result.all_events if e.event_type == dg.DagsterEventType.STEP_FAILURE)
    assert "RUN_RETENTION_FAILED_DAYS=13 is shorter than the 14 days" in str(failure.step_failure_data.error)
    assert {r.run_id for r in runs.values()} <= {r.run_id for r in pg_instance.get_runs()}


# --- VACUUM after the cleanup


@pytest.fixture
def no_autovacuum(pg_instance: dg.DagsterInstance) -> Iterator[sa.Engine]:
    """Autovacuum off on the cleaned tables for the test, so only the cleanup's own VACUUM can remove dead rows."""
    with pg_instance.run_storage.connect() as conn:
        url = conn.engine.url
    engine = sa.create_engine(url, poolclass=sa.pool.NullPool, isolation_level="AUTOCOMMIT")
    tables = ("event_logs", "runs", "run_tags")
    with engine.connect() as conn:
        for table in tables:
            conn.exec_driver_sql(f"ALTER TABLE {table} SET (autovacuum_enabled = false)")
    try:
        yield engine
    finally:
        with engine.connect() as conn:
            for table in tables:
                conn.exec_driver_sql(f"ALTER TABLE {table} RESET (autovacuum_enabled)")
        engine.dispose()


def _dead_tuples(instance: dg.DagsterInstance, engine: sa.Engine) -> dict[str, int]:
    # Each backend reports its table statistics when it goes idle; ask the storages' kept connections to report now.
    for connect in (instance.event_log_storage.index_connection, instance.run_storage.connect):
        with connect() as conn:
            conn.exec_driver_sql("SELECT pg_stat_force_next_flush()")
            if conn.in_transaction():
                conn.commit()
    time.sleep(1.1)
    with engine.connect() as conn:
        rows = conn.execute(sa.text("SELECT relname, n_dead_tup FROM pg_stat_user_tables "
                                    "WHERE relname IN ('event_logs', 'runs')")).all()
    return dict(rows)


def _dead_tuples_down_to(instance: dg.DagsterInstance, engine: sa.Engine, baseline: dict[str, int],
                         timeout: float = 20.0) -> dict[str, int]:
    """The dead tuples once back at `baseline` or below, else the last reading after `timeout`: statistics reach
    pg_stat_user_tables only when each backend flushes them, later than a fixed sleep on a host at load ~40."""
    deadline = time.monotonic() + timeout
    while True:
        after = _dead_tuples(instance, engine)
        if all(after[table] <= baseline[table] for table in ("event_logs", "runs")) or time.monotonic() > deadline:
            return after
        time.sleep(0.2)


def test_vacuum_after_the_cleanup_removes_the_dead_rows(pg_instance: dg.DagsterInstance, no_autovacuum: sa.Engine) -> None:
    factory = RunFactory(pg_instance)
    old = [factory.recorded(S.SUCCESS, age_days=20) for _ in range(12)]
    factory.recorded(S.SUCCESS)  # the latest success, so every old one goes
    events = sum(event_count(pg_instance, r.run_id) for r in old)
    vacuum_after_delete(pg_instance)  # start from vacuumed tables: earlier tests' rows are gone
    # What a VACUUM cannot remove yet (row versions some open snapshot may still see) stays counted: the baseline.
    baseline = _dead_tuples(pg_instance, no_autovacuum)

    report = prune_successful_runs(pg_instance, 14, vacuum=False)
    assert report.deleted == 12 and report.vacuum_seconds is None
    dead = _dead_tuples(pg_instance, no_autovacuum)
    assert dead["event_logs"] >= baseline["event_logs"] + events
    assert dead["runs"] >= baseline["runs"] + 12

    assert vacuum_after_delete(pg_instance) is not None
    after = _dead_tuples_down_to(pg_instance, no_autovacuum, baseline)
    assert after["event_logs"] <= baseline["event_logs"] and after["runs"] <= baseline["runs"]


def _vacuum_counts(engine: sa.Engine) -> dict[str, int]:
    # VACUUM writes its own count straight to the shared statistics, unlike a DELETE's dead-row count, which a
    # backend flushes when it goes idle or exits and so can land after the VACUUM's report and count again.
    with engine.connect() as conn:
        return dict(conn.execute(sa.text(
            "SELECT relname, vacuum_count FROM pg_stat_user_tables "
            "WHERE relname IN ('event_logs', 'asset_event_tags', 'runs', 'run_tags')")).all())


def test_the_cleanup_vacuums_by_default_when_it_deleted(pg_instance: dg.DagsterInstance, no_autovacuum: sa.Engine) -> None:
    """The VACUUM a default cleanup runs is the one the test above shows removing the dead rows; here, that a default
    cleanup runs it once on each cleaned table when it deleted, and not at all when it deleted nothing."""
    factory = RunFactory(pg_instance)
    [factory.recorded(S.SUCCESS, age_days=20) for _ in range(5)]
    factory.recorded(S.SUCCESS)
    before = _vacuum_counts(no_autovacuum)
    report = prune_successful_runs(pg_instance, 14)
    assert report.deleted == 5 and report.vacuum_seconds is not None
    after = _vacuum_counts(no_autovacuum)
    assert {table: after[table] - before[table] for table in after} == {
        "event_logs": 1, "asset_event_tags": 1, "runs": 1, "run_tags": 1}
    # nothing deleted: no VACUUM
    assert prune_successful_runs(pg_instance, 14).vacuum_seconds is None
    assert _vacuum_counts(no_autovacuum) == after


# --- REINDEX: the index pages kept runs hold


def _filenodes(engine: sa.Engine) -> dict[str, int]:
    with engine.connect() as conn:
        return dict(conn.execute(sa.text(
            "SELECT i.relname, i.relfilenode FROM pg_index x JOIN pg_class i ON i.oid = x.indexrelid "
            "JOIN pg_class t ON t.oid = x.indrelid WHERE t.relname IN ('event_logs', 'runs', 'run_tags')")).all())


def test_reindex_rebuilds_every_run_and_event_index_and_drops_a_failed_rebuild(
    pg_instance: dg.DagsterInstance, no_autovacuum: sa.Engine
) -> None:
    from orchestration_core.audit.bulk_delete import reindex_tables

    factory = RunFactory(pg_instance)
    kept = [factory.recorded(S.FAILURE, age_days=20) for _ in range(3)]
    # What an interrupted REINDEX CONCURRENTLY leaves behind: an invalid index named <index>_ccnew.
    with no_autovacuum.connect() as conn:
        with pytest.raises(sa.exc.IntegrityError):
            conn.exec_driver_sql("CREATE UNIQUE INDEX CONCURRENTLY idx_event_type_ccnew ON event_logs (run_id)")
    before = _filenodes(no_autovacuum)
    assert "idx_event_type_ccnew" in before and {"idx_event_type", "runs_pkey", "run_tags_pkey"} <= set(before)

    assert reindex_tables(pg_instance) is not None

    after = _filenodes(no_autovacuum)
    assert "idx_event_type_ccnew" not in after
    before.pop("idx_event_type_ccnew")
    assert set(after) == set(before)
    assert [name for name in before if after[name] == before[name]] == []  # every index got new storage
    assert all(event_count(pg_instance, r.run_id) > 0 for r in kept)
    with no_autovacuum.connect() as conn:
        assert conn.execute(sa.text("SELECT count(*) FROM pg_index x JOIN pg_class t ON t.oid = x.indrelid "
                                    "WHERE t.relname = 'event_logs' AND NOT x.indisvalid")).scalar() == 0


@pytest.mark.parametrize(("every_days", "reindexed"), [(1, True), (0, False)])
def test_the_nightly_job_reindexes_when_due(pg_instance: dg.DagsterInstance, every_days: int, reindexed: bool) -> None:
    factory = RunFactory(pg_instance)
    factory.recorded(S.SUCCESS, age_days=20)
    factory.recorded(S.SUCCESS)
    config = {"ops": {"prune_old_successful_runs": {"config": {"reindex_every_days": every_days}}}}
    result = cleanup_job_runs.execute_in_process(instance=pg_instance, run_config=config)
    assert result.success
    [output] = [e for e in result.all_events if e.event_type == dg.DagsterEventType.STEP_OUTPUT]
    metadata = output.event_specific_data.metadata
    assert metadata["deleted"].value == 1
    assert ("reindex_seconds" in metadata) is reindexed
    assert "vacuum_seconds" in metadata


def test_a_negative_reindex_period_fails_before_anything_is_deleted(pg_instance: dg.DagsterInstance) -> None:
    old = RunFactory(pg_instance).recorded(S.SUCCESS, age_days=20)
    RunFactory(pg_instance).recorded(S.SUCCESS)
    config = {"ops": {"prune_old_successful_runs": {"config": {"reindex_every_days": -1}}}}
    result = cleanup_job_runs.execute_in_process(instance=pg_instance, run_config=config, raise_on_error=False)
    assert not result.success
    assert pg_instance.get_run_by_id(old.run_id) is not None
