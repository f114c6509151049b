"""The dispatcher sensor and the run-result sensors against a real registry and a Postgres Dagster instance."""

from __future__ import annotations

import datetime as dt
import logging
import time

import dagster as dg
import pytest
import sqlalchemy as sa

from dagster._core.test_utils import create_run_for_test
from dagster._daemon.monitoring.run_monitoring import check_run_timeout
from maintenance_jobs import sensors
from maintenance_jobs.jobs import example_executor_job
from maintenance_jobs.registry import create_task, get_task, update_task
from maintenance_jobs.resources import MaintenanceRegistryResource
from maintenance_jobs.seed import prepare_registry
from maintenance_jobs.sensors import (
    classify_run_end,
    dispatch_tick,
    maintenance_dispatcher,
    record_finished_run,
    record_maintenance_success,
)
from maintenance_jobs.tags import TAG_STATUS, TAG_TASK
from tests.task_rows import task_data

pytestmark = pytest.mark.integration

UTC = dt.UTC
# 2025-06-03 03:05:20 in Auckland (NZST, a Tuesday)
NOW = dt.datetime(2025, 6, 2, 15, 5, 20, tzinfo=UTC)


def keys(tick) -> list[str]:
    return [r.run_key for r in tick.result.run_requests]


@pytest.fixture
def example_enabled(registry_resource: MaintenanceRegistryResource) -> MaintenanceRegistryResource:
    """The seeded registry with the every-minute example task switched on, as an operator trying the scheduler would."""
    prepare_registry(registry_resource.database_url)
    update_task(registry_resource.engine(), "test_example_task", {"enabled": True})
    return registry_resource


def test_a_fresh_registry_starts_no_run_a_minute(registry_resource: MaintenanceRegistryResource) -> None:
    tick = dispatch_tick(registry_resource, None, NOW)  # the first tick also migrates and seeds
    assert keys(tick) == ["backup_docker_configs_daily:2025-06-03T03:05+12:00"]
    later = dispatch_tick(registry_resource, tick.result.cursor, NOW + dt.timedelta(minutes=1))
    assert later.result.run_requests == [] and "no task due" in later.result.skip_reason.skip_message


def test_first_tick_launches_seed_tasks_due_now_by_priority(example_enabled: MaintenanceRegistryResource) -> None:
    tick = dispatch_tick(example_enabled, None, NOW)
    requests = tick.result.run_requests
    assert keys(tick) == [
        "backup_docker_configs_daily:2025-06-03T03:05+12:00",
        "test_example_task:2025-06-03T03:05+12:00",
    ]
    backup, example = requests
    assert backup.job_name == "config_backup_executor" and example.job_name == "example_executor"
    assert example.run_config == {"ops": {"run_example_executor": {"config": {"message": "Hello World", "delay_seconds": 2}}}}
    assert backup.tags == {
        "maintenance/task": "backup_docker_configs_daily",
        "maintenance/service": "scheduler",
        "maintenance/executor": "config_backup_executor",
        "maintenance/triggered_by": "scheduler",
        "maintenance/priority": "20",
        "maintenance/scheduled_minute": "2025-06-03T03:05+12:00",
        "orchestration/kind": "maintenance",
        "dagster/priority": "80",
        "dagster/max_runtime": "3600",
        "dagster/max_retries": "1",
        "dagster/retry_on_asset_or_op_failure": "true",
    }
    assert tick.result.cursor == "2025-06-02T15:05:00+00:00"
    # Every request's run config is valid for its job.
    for request in requests:
        job = {"example_executor": example_executor_job}.get(request.job_name)
        if job is not None:
            assert dg.validate_run_config(job, request.run_config)


def test_no_minute_missed_or_repeated_across_ticks_and_restarts(example_enabled: MaintenanceRegistryResource) -> None:
    launched: list[str] = []
    cursor = None
    # Ticks at irregular moments: twice in one minute, a gap of 3 minutes (a restart), then regular again.
    for moment in ["15:05:20", "15:05:50", "15:06:05", "15:09:40", "15:10:41", "15:11:39"]:
        now = dt.datetime.combine(NOW.date(), dt.time.fromisoformat(moment), UTC)
        # A fresh resource each time stands in for a restarted code server; only the cursor carries over.
        registry = MaintenanceRegistryResource(database_url=example_enabled.database_url, timezone="Pacific/Auckland")
        tick = dispatch_tick(registry, cursor, now)
        cursor = tick.result.cursor
        launched += [k for k in keys(tick) if k.startswith("test_example_task:")]
    minutes = [k.split(":", 1)[1] for k in launched]
    assert minutes == [f"2025-06-03T03:{m:02d}+12:00" for m in range(5, 12)]


def test_catch_up_is_bounded_and_reported(example_enabled: MaintenanceRegistryResource) -> None:
    three_hours_ago = (NOW - dt.timedelta(hours=3)).replace(second=0).isoformat()
    tick = dispatch_tick(example_enabled, three_hours_ago, NOW)
    example = [k for k in keys(tick) if k.startswith("test_example_task:")]
    assert len(example) == 60 and example[-1].endswith("03:05+12:00") and example[0].endswith("02:06+12:00")
    assert tick.catch_up_notice and "120 older minutes" in tick.catch_up_notice
    # The 03:05 backup is inside the window; nothing due before the window edge was launched.
    assert "backup_docker_configs_daily:2025-06-03T03:05+12:00" in keys(tick)


def test_registry_changes_apply_on_the_next_tick(registry_resource: MaintenanceRegistryResource) -> None:
    engine = registry_resource.engine()
    update_task(engine, "test_example_task", {"enabled": False})
    create_task(engine, task_data("new_urgent", priority=1, minute=6))
    tick = dispatch_tick(registry_resource, "2025-06-02T15:05:00+00:00", NOW + dt.timedelta(minutes=1))
    assert keys(tick) == ["new_urgent:2025-06-03T03:06+12:00"]
    assert tick.result.run_requests[0].tags["dagster/priority"] == "99"
    quiet = dispatch_tick(registry_resource, tick.result.cursor, NOW + dt.timedelta(minutes=2))
    assert quiet.result.run_requests == [] and "no task due" in quiet.result.skip_reason.skip_message


class FakeClock:
    """The dispatcher's clock in a test: a fixed UTC instant that moves only when the test moves it."""

    def __init__(self, now: dt.datetime) -> None:
        self.now = now

    def __call__(self) -> dt.datetime:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += dt.timedelta(seconds=seconds)


@pytest.mark.parametrize(
    ("seconds_later", "example_minutes", "cursor"),
    [
        (30, [], "2025-06-02T15:05:00+00:00"),  # the same minute again: nothing new is due, the cursor stays
        (60, ["03:06"], "2025-06-02T15:06:00+00:00"),  # the next minute, and only it
        # A late tick catches up on every minute since the cursor; the cursor is its own minute, seconds dropped.
        (180, ["03:06", "03:07", "03:08"], "2025-06-02T15:08:00+00:00"),
    ],
)
def test_sensor_definition_evaluates_against_the_registry(
    example_enabled: MaintenanceRegistryResource, pg_instance: dg.DagsterInstance, monkeypatch: pytest.MonkeyPatch,
    seconds_later: int, example_minutes: list[str], cursor: str,
) -> None:
    clock = FakeClock(NOW)
    monkeypatch.setattr(sensors, "utc_now", clock)

    def evaluate(cursor: str | None):
        context = dg.build_sensor_context(instance=pg_instance, cursor=cursor,
                                          resources={"maintenance_registry": example_enabled})
        return maintenance_dispatcher.evaluate_tick(context)

    first = evaluate(None)
    assert [r.run_key for r in first.run_requests] == [
        "backup_docker_configs_daily:2025-06-03T03:05+12:00",
        "test_example_task:2025-06-03T03:05+12:00",
    ]
    assert first.cursor == "2025-06-02T15:05:00+00:00"
    clock.advance(seconds_later)
    again = evaluate(first.cursor)
    assert [r.run_key for r in again.run_requests] == [
        f"test_example_task:2025-06-03T{minute}+12:00" for minute in example_minutes
    ]
    assert again.cursor == cursor
    if not example_minutes:
        assert "already evaluated" in again.skip_message


@pytest.mark.parametrize(
    ("status", "messages", "expected"),
    [
        (dg.DagsterRunStatus.SUCCESS, [], "success"),
        (dg.DagsterRunStatus.FAILURE, [], "failed"),
        (dg.DagsterRunStatus.CANCELED, ["Sending run termination request."], "canceled"),
        (dg.DagsterRunStatus.FAILURE, ["Canceling due to exceeding maximum runtime of 60 seconds."], "timeout"),
        (dg.DagsterRunStatus.CANCELED, ["Canceling due to exceeding maximum runtime of 60 seconds."], "timeout"),
    ],
)
def test_classify_run_end(status, messages, expected) -> None:
    assert classify_run_end(status, messages) == expected


def test_finished_runs_update_the_task_row(
    registry_resource: MaintenanceRegistryResource, pg_instance: dg.DagsterInstance
) -> None:
    engine = registry_resource.engine()
    create_task(engine, task_data("pinger", config={"message": "ping", "delay_seconds": 0.3}))
    result = example_executor_job.execute_in_process(
        run_config={"ops": {"run_example_executor": {"config": {"message": "ping", "delay_seconds": 0.3}}}},
        instance=pg_instance,
        tags={TAG_TASK: "pinger"},
    )
    run = pg_instance.get_run_by_id(result.run_id)
    success_event = pg_instance.get_records_for_run(result.run_id, of_type=dg.DagsterEventType.RUN_SUCCESS).records[0]
    # Through the sensor definition, as the daemon would call it.
    context = dg.build_run_status_sensor_context(
        sensor_name="record_maintenance_success",
        dagster_event=success_event.event_log_entry.dagster_event,
        dagster_instance=pg_instance,
        dagster_run=run,
        resources={"maintenance_registry": registry_resource},
    )
    record_maintenance_success(context)
    task = get_task(engine, "pinger")
    assert task.last_status == "success" and 0.3 <= task.last_duration_seconds < 30
    record = pg_instance.get_run_record_by_id(result.run_id)
    assert task.last_run == dt.datetime.fromtimestamp(record.start_time, UTC)
    assert pg_instance.get_run_by_id(result.run_id).tags[TAG_STATUS] == "success"


def test_run_stopped_by_max_runtime_is_recorded_as_timeout(
    registry_resource: MaintenanceRegistryResource, pg_instance: dg.DagsterInstance
) -> None:
    engine = registry_resource.engine()
    create_task(engine, task_data("slow", timeout_seconds=1))
    run = create_run_for_test(
        pg_instance,
        job_name="example_executor",
        tags={TAG_TASK: "slow", "dagster/max_runtime": "1"},
        status=dg.DagsterRunStatus.STARTING,
    )
    pg_instance.report_engine_event("starting", run)
    pg_instance.handle_run_event(
        run.run_id,
        dg.DagsterEvent(event_type_value=dg.DagsterEventType.RUN_START.value, job_name="example_executor"),
    )
    time.sleep(1.2)
    # The real run-monitoring check that the daemon runs.
    check_run_timeout(pg_instance, pg_instance.get_run_record_by_id(run.run_id), logging.getLogger("test"), 0)
    finished = pg_instance.get_run_by_id(run.run_id)
    assert finished.status in (dg.DagsterRunStatus.FAILURE, dg.DagsterRunStatus.CANCELED)
    assert record_finished_run(pg_instance, finished, registry_resource) == "timeout"
    task = get_task(engine, "slow")
    assert task.last_status == "timeout" and task.last_duration_seconds >= 1


def test_registry_rows_are_untouched_by_runs_without_a_task_tag(
    registry_resource: MaintenanceRegistryResource, pg_instance: dg.DagsterInstance
) -> None:
    run = create_run_for_test(pg_instance, job_name="example_executor", status=dg.DagsterRunStatus.SUCCESS)
    assert record_finished_run(pg_instance, run, registry_resource) == "no task tag"
    with registry_resource.engine().connect() as conn:
        assert conn.execute(sa.text("SELECT count(*) FROM scheduled_tasks WHERE last_run IS NOT NULL")).scalar() == 0


def test_a_task_the_settings_refuse_is_never_launched_and_the_tick_says_why(
    example_enabled: MaintenanceRegistryResource, monkeypatch: pytest.MonkeyPatch, tmp_path
) -> None:
    """Narrowing the backup roots after the registry was seeded refuses the seeded backup: it is reported in the
    tick, never requested, and every other due task still runs."""
    monkeypatch.setenv("MAINTENANCE_BACKUP_SOURCE_ROOTS", str(tmp_path))
    tick = dispatch_tick(example_enabled, None, NOW)
    assert keys(tick) == ["test_example_task:2025-06-03T03:05+12:00"]
    (note,) = tick.refused
    assert note.startswith("task backup_docker_configs_daily not run: refused by the current settings "
                           "(config.sources.0.path: '/data' must resolve under")
    update_task(example_enabled.engine(), "test_example_task", {"enabled": False})
    alone = dispatch_tick(example_enabled, None, NOW)
    assert alone.result.run_requests == []
    assert alone.result.skip_reason.skip_message.startswith("task backup_docker_configs_daily not run: refused")


def test_a_run_that_failed_before_its_op_ran_is_recorded_with_the_reason(
    registry_resource: MaintenanceRegistryResource, pg_instance: dg.DagsterInstance
) -> None:
    """A launch refused by the run launcher (no op ever ran): the run-end sensor still tags its outcome and error,
    so /executions does not show `error: null`."""
    create_task(registry_resource.engine(), task_data("pinger"))
    run = pg_instance.create_run_for_job(
        job_def=example_executor_job,
        run_config={"ops": {"run_example_executor": {"config": {"message": "ping", "delay_seconds": 0}}}},
        tags={TAG_TASK: "pinger"},
    )
    pg_instance.report_run_failed(run, "No docker image specified by the instance config or repository")
    assert record_finished_run(pg_instance, pg_instance.get_run_by_id(run.run_id), registry_resource) == "failed"
    tags = pg_instance.get_run_by_id(run.run_id).tags
    assert tags["racing/outcome"] == "failed"
    assert tags["racing/error"] == "No docker image specified by the instance config or repository"
    assert get_task(registry_resource.engine(), "pinger").last_status == "failed"
