"""Recording ended maintenance runs in the execution history, on real Postgres: once per run, with the old fields and
the op's metadata, by the status sensors or the backfill pass, across a crash between the write and the run's tag,
a registry outage, and the upgrade of an install whose runs predate the history."""

from __future__ import annotations

import datetime as dt
import json

import dagster as dg
import pytest
import sqlalchemy as sa
from dagster._core.test_utils import create_run_for_test

from maintenance_jobs.database.migrate import current_revision, upgrade
from maintenance_jobs.database.tables import dispatch_skips, scheduled_tasks, task_executions
from maintenance_jobs.execution_history import store
from maintenance_jobs.execution_history.recorder import backfill_history, record_run
from maintenance_jobs.execution_history.summary import execution_id, summarize
from maintenance_jobs.jobs import example_executor_job, plugin_executor_job
from maintenance_jobs.registry import create_task, get_task
from maintenance_jobs.resources import MaintenanceRegistryResource
from maintenance_jobs.sensors import dispatch_tick, record_finished_run
from orchestration_core.audit.execution_history import TAG_HISTORY_RECORDED
from tests.orchestration_core.audit.run_factory import backdate_finished_run
from tests.task_rows import task_data

pytestmark = pytest.mark.integration
S = dg.DagsterRunStatus
NOW = dt.datetime.now(dt.UTC)
TASK_TAGS = {"maintenance/task": "pinger", "maintenance/service": "scheduler",
             "maintenance/executor": "example_executor",
             "maintenance/triggered_by": "manual", "maintenance/priority": "40", "orchestration/kind": "maintenance"}


def rows(engine: sa.Engine) -> dict[str, sa.Row]:
    with engine.connect() as conn:
        return {row.run_id: row for row in conn.execute(sa.select(task_executions))}


def ping(instance: dg.DagsterInstance, message: str = "ping", **tags: str) -> dg.RunRecord:
    result = example_executor_job.execute_in_process(
        run_config={"ops": {"run_example_executor": {"config": {"message": message, "delay_seconds": 0.2}}}},
        instance=instance, tags=TASK_TAGS | tags)
    return instance.get_run_record_by_id(result.run_id)


def test_a_run_is_recorded_once_with_the_old_fields_and_its_metadata(
    registry_engine: sa.Engine, pg_instance: dg.DagsterInstance
) -> None:
    task = create_task(registry_engine, task_data("pinger", priority=40))
    record = ping(pg_instance)
    assert record_run(pg_instance, record, registry_engine) == "success"
    assert record_run(pg_instance, record, registry_engine) == "success"  # again: nothing changes
    stored = rows(registry_engine)
    assert list(stored) == [record.dagster_run.run_id]
    row = stored[record.dagster_run.run_id]
    assert row.id == execution_id(row.run_id) and 0 < row.id < 2**53
    assert (row.task_id, row.task_name, row.service, row.executor, row.priority) == (
        task.id, "pinger", "scheduler", "example_executor", 40)
    assert (row.status, row.triggered_by, row.retry_count, row.error) == ("success", "manual", 0, None)
    assert row.output == "Example task completed: ping (waited 0.2s)"
    assert row.metadata == {"message": row.output, "delay_seconds": 0.2}
    assert row.triggered_at == record.create_timestamp.replace(tzinfo=dt.UTC)
    assert row.started_at.timestamp() == pytest.approx(record.start_time)
    assert 0.2 <= row.duration_seconds < 30 and row.completed_at > row.started_at
    assert (row.job_name, row.dagster_status, row.scheduled_for, row.parent_run_id) == (
        "example_executor", "SUCCESS", None, None)
    tags = pg_instance.get_run_by_id(row.run_id).tags
    assert tags[TAG_HISTORY_RECORDED] == row.run_id and tags["maintenance/status"] == "success"
    stored_task = get_task(registry_engine, "pinger")
    assert (stored_task.last_status, stored_task.retry_count) == ("success", 0)
    assert stored_task.last_run == row.started_at


def test_a_failed_retry_records_its_error_attempt_and_parent(
    registry_engine: sa.Engine, pg_instance: dg.DagsterInstance
) -> None:
    create_task(registry_engine, task_data("pinger"))
    first = ping(pg_instance)
    record_run(pg_instance, first, registry_engine)
    # Dagster's retry of a run copies its tags (triggered_by too) and adds the retry group's.
    result = plugin_executor_job.execute_in_process(
        run_config={"ops": {"run_plugin_executor": {"config": {"executor": "no_such_plugin", "config_json": "{}"}}}},
        instance=pg_instance, raise_on_error=False,
        tags=TASK_TAGS | {"maintenance/executor": "no_such_plugin", "dagster/parent_run_id": first.dagster_run.run_id,
                          "dagster/root_run_id": first.dagster_run.run_id, "dagster/retry_number": "1",
                          TAG_HISTORY_RECORDED: first.dagster_run.run_id})  # copied from the recorded parent
    retry = pg_instance.get_run_record_by_id(result.run_id)
    assert backfill_history(pg_instance, registry_engine, NOW).recorded == [result.run_id]
    row = rows(registry_engine)[result.run_id]
    assert (row.status, row.triggered_by, row.retry_count, row.parent_run_id) == (
        "failed", "retry", 1, first.dagster_run.run_id)
    assert "unknown executor 'no_such_plugin'" in row.error and row.output is None
    assert row.dagster_status == "FAILURE" and retry.dagster_run.status == S.FAILURE
    task = get_task(registry_engine, "pinger")
    assert (task.last_status, task.retry_count) == ("failed", 1)  # the task row follows the latest attempt


def test_a_crash_between_the_write_and_the_tag_is_finished_by_the_backfill(
    registry_engine: sa.Engine, pg_instance: dg.DagsterInstance
) -> None:
    record = ping(pg_instance)
    store.write_summary(registry_engine, summarize(pg_instance, record))  # ... and the process died here
    assert TAG_HISTORY_RECORDED not in pg_instance.get_run_by_id(record.dagster_run.run_id).tags
    report = backfill_history(pg_instance, registry_engine, NOW)
    assert report.recorded == [record.dagster_run.run_id] and report.caught_up
    assert len(rows(registry_engine)) == 1
    assert pg_instance.get_run_by_id(record.dagster_run.run_id).tags[TAG_HISTORY_RECORDED] == record.dagster_run.run_id
    assert backfill_history(pg_instance, registry_engine, NOW).recorded == []


def test_runs_the_status_sensor_could_not_record_are_recorded_when_the_registry_is_back(
    registry_url: str, registry_engine: sa.Engine, pg_instance: dg.DagsterInstance
) -> None:
    create_task(registry_engine, task_data("pinger"))
    record = ping(pg_instance)
    unreachable = MaintenanceRegistryResource(database_url="postgresql+psycopg2://nobody@127.0.0.1:1/none",
                                              timezone="UTC")
    with pytest.raises(sa.exc.OperationalError):
        # What the run status sensor does when the run ends; Dagster logs the error and moves its cursor on.
        record_finished_run(pg_instance, record.dagster_run, unreachable)
    assert rows(registry_engine) == {}
    report = backfill_history(pg_instance, registry_engine, NOW)
    assert report.recorded == [record.dagster_run.run_id]
    assert get_task(registry_engine, "pinger").last_status == "success"


def test_an_upgraded_install_records_the_runs_still_in_storage(
    fresh_database_url: str, pg_instance: dg.DagsterInstance
) -> None:
    upgrade(fresh_database_url, "0001")  # the registry before the history existed
    engine = sa.create_engine(fresh_database_url)
    with engine.begin() as conn:
        conn.execute(sa.insert(scheduled_tasks).values(task_name="pinger", service="scheduler",
                                                       executor="example_executor"))
    old = []
    for day in range(5):  # runs of the last days, one of them still running, none recorded anywhere
        record = ping(pg_instance, f"day {day}")
        backdate_finished_run(pg_instance, record.dagster_run.run_id, NOW - dt.timedelta(days=5 - day))
        old.append(record.dagster_run.run_id)
    failed = create_run_for_test(pg_instance, job_name="example_executor", tags=TASK_TAGS, status=S.FAILURE).run_id
    running = create_run_for_test(pg_instance, job_name="example_executor", tags=TASK_TAGS, status=S.STARTED).run_id
    create_run_for_test(pg_instance, job_name="morning_scrape", tags={"orchestration/kind": "racing"},
                        status=S.SUCCESS)

    upgrade(fresh_database_url)
    assert current_revision(fresh_database_url) == "0002"
    assert get_task(engine, "pinger").retry_count == 0
    passes, marks = [], []
    while not passes or not passes[-1].caught_up:
        passes.append(backfill_history(pg_instance, engine, NOW, batch=2))
        marks.append(passes[-1].recorded_through)  # every run that ended before it is recorded
        assert len(passes) < 10
    assert [len(p.recorded) for p in passes] == [2, 2, 2]
    assert marks == sorted(marks) and marks[-1] == NOW - dt.timedelta(minutes=5)
    assert marks[0] <= NOW - dt.timedelta(days=2)  # the third-oldest run's end: the first two are recorded
    assert set(rows(engine)) == set(old) | {failed}
    assert get_task(engine, "pinger").last_status in ("success", "failed")
    # The running run is recorded when it ends (here: by the next pass, as the status sensor missed it).
    pg_instance.report_run_failed(pg_instance.get_run_by_id(running))
    assert backfill_history(pg_instance, engine, NOW + dt.timedelta(minutes=10)).recorded == [running]
    engine.dispose()


def test_two_runs_that_would_share_an_id_get_different_ones(
    registry_engine: sa.Engine, pg_instance: dg.DagsterInstance, monkeypatch: pytest.MonkeyPatch
) -> None:
    first, second = ping(pg_instance), ping(pg_instance)
    real = execution_id
    monkeypatch.setattr(store, "execution_id", lambda run_id, attempt=0: 12345 if attempt == 0 else real(run_id,
                                                                                                           attempt))
    record_run(pg_instance, first, registry_engine)
    record_run(pg_instance, second, registry_engine)
    record_run(pg_instance, second, registry_engine)  # and again: still one row
    stored = rows(registry_engine)
    assert stored[first.dagster_run.run_id].id == 12345
    assert stored[second.dagster_run.run_id].id == real(second.dagster_run.run_id, 1) and len(stored) == 2


def test_the_dispatcher_records_the_minutes_its_catch_up_bound_skips(
    registry_resource: MaintenanceRegistryResource,
) -> None:
    now = dt.datetime(2025, 6, 2, 15, 5, 20, tzinfo=dt.UTC)
    cursor = (now - dt.timedelta(hours=3)).replace(second=0).isoformat()
    for _ in range(2):  # a tick evaluated twice (its cursor not saved) records the same range once
        tick = dispatch_tick(registry_resource, cursor, now)
        assert "catch-up limited to the last 60 minutes" in tick.catch_up_notice
    with registry_resource.engine().connect() as conn:
        skips = conn.execute(sa.select(dispatch_skips)).all()
    assert len(skips) == 1
    assert skips[0].skipped_from == dt.datetime(2025, 6, 2, 12, 6, tzinfo=dt.UTC)
    assert skips[0].skipped_until == dt.datetime(2025, 6, 2, 14, 6, tzinfo=dt.UTC)  # the first minute evaluated
    assert "MAINTENANCE_MAX_CATCHUP_MINUTES" in skips[0].reason and "12:06" in skips[0].reason
    # A tick without a gap records nothing.
    dispatch_tick(registry_resource, tick.result.cursor, now + dt.timedelta(minutes=1))
    with registry_resource.engine().connect() as conn:
        assert conn.execute(sa.select(sa.func.count()).select_from(dispatch_skips)).scalar() == 1


def test_metadata_too_large_keeps_its_keys(registry_engine: sa.Engine) -> None:
    from maintenance_jobs.execution_history.summary import MAX_METADATA_BYTES, plain_metadata

    big = plain_metadata({"files": dg.MetadataValue.json(["x" * 1000] * 100), "count": 3})
    assert big["keys"] == ["count", "files"] and "over" in big["truncated"]
    small = plain_metadata({"sources": dg.MetadataValue.json([{"name": "a"}]), "path": dg.MetadataValue.path("/x"),
                            "n": dg.MetadataValue.int(2), "ok": True})
    assert small == {"sources": [{"name": "a"}], "path": "/x", "n": 2, "ok": True}
    assert len(json.dumps(small)) < MAX_METADATA_BYTES


def test_migration_0002_downgrades_cleanly(fresh_database_url: str) -> None:
    upgrade(fresh_database_url)
    from alembic import command

    from maintenance_jobs.database.migrate import alembic_config

    engine = sa.create_engine(fresh_database_url)
    with engine.begin() as conn:
        command.downgrade(alembic_config(conn), "0001")
    inspector = sa.inspect(engine)
    assert not {"task_executions", "dispatch_skips"} & set(inspector.get_table_names())
    assert "retry_count" not in {c["name"] for c in inspector.get_columns("scheduled_tasks")}
    engine.dispose()
    upgrade(fresh_database_url)
    assert current_revision(fresh_database_url) == "0002"


def test_history_cli_errors_and_json(registry_url: str, registry_engine: sa.Engine, pg_instance: dg.DagsterInstance,
                                     capsys: pytest.CaptureFixture[str]) -> None:
    from maintenance_jobs.cli import main as maintenance_cli

    assert maintenance_cli(["--database-url", registry_url, "history", "nothing"]) == 2
    assert "task 'nothing' not found" in capsys.readouterr().err
    create_task(registry_engine, task_data("pinger", minute=0))  # hourly at :00
    assert maintenance_cli(["--database-url", registry_url, "history", "pinger", "--since", "yesterday"]) == 2
    assert "use 30d" in capsys.readouterr().err
    assert maintenance_cli(["--database-url", registry_url, "history", "pinger", "--since", "200d"]) == 2
    assert "over 100 days" in capsys.readouterr().err
    record = ping(pg_instance)  # a manual run: not for an expected minute
    record_run(pg_instance, record, registry_engine)
    assert maintenance_cli(["--database-url", registry_url, "history", "pinger", "--since", "2h", "--json"]) == 0
    answer = json.loads(capsys.readouterr().out)
    assert [i["run_id"] for i in answer["other_runs"]] == [record.dagster_run.run_id]
    assert answer["live_runs_included"] and answer["schedule"] == "0 * * * *"
    assert maintenance_cli(["--database-url", registry_url, "history", "pinger", "--since", "2h"]) == 0
    assert "runs not for an expected minute:" in capsys.readouterr().out


def test_the_backfill_sensor_fails_its_tick_when_a_run_cannot_be_recorded(
    registry_resource: MaintenanceRegistryResource, pg_instance: dg.DagsterInstance, monkeypatch: pytest.MonkeyPatch
) -> None:
    from maintenance_jobs.execution_history import recorder
    from maintenance_jobs.sensors import maintenance_history_backfill

    good, bad = ping(pg_instance), ping(pg_instance)
    real = recorder.summarize

    def summarize_or_fail(instance, record):
        if record.dagster_run.run_id == bad.dagster_run.run_id:
            raise ValueError("unreadable run")
        return real(instance, record)

    monkeypatch.setattr(recorder, "summarize", summarize_or_fail)
    context = dg.build_sensor_context(instance=pg_instance, resources={"maintenance_registry": registry_resource})
    with pytest.raises(RuntimeError, match=f"{bad.dagster_run.run_id}: ValueError: unreadable run"):
        maintenance_history_backfill(context)
    assert set(rows(registry_resource.engine())) == {good.dagster_run.run_id}  # the others are recorded
    monkeypatch.setattr(recorder, "summarize", real)
    assert "recorded 1 ended runs" in maintenance_history_backfill(context).skip_message


def test_the_run_guards_verdict_reaches_the_recorded_summary(
    registry_resource: MaintenanceRegistryResource, pg_instance: dg.DagsterInstance
) -> None:
    """A run that died before its op started is recorded as it ends; the guard's later verdict (re-launched) is what
    its history row's error then says, as /executions showed it when it read the run's tags."""
    from maintenance_jobs.lost_runs import guard_tick
    from orchestration_core.audit.alert_webhook import AlertWebhook

    engine = registry_resource.engine()
    create_task(engine, task_data("pinger"))
    run = create_run_for_test(pg_instance, job_name="example_executor", tags=TASK_TAGS, status=S.STARTING)
    pg_instance.report_run_failed(pg_instance.get_run_by_id(run.run_id))
    record_run(pg_instance, pg_instance.get_run_record_by_id(run.run_id), engine)  # the status sensor, at once
    assert "died before its op started" not in rows(engine)[run.run_id].error  # the run's own reason, so far
    tick = guard_tick(pg_instance, engine, AlertWebhook(url=""), dt.datetime.now(dt.UTC))
    assert [r.run_key for r in tick.requests] == [f"pinger:relaunch:{run.run_id}"]
    error = rows(engine)[run.run_id].error
    assert "died before its op started" in error and "requested as pinger:relaunch:" in error
    assert error == pg_instance.get_run_by_id(run.run_id).tags["racing/error"]
