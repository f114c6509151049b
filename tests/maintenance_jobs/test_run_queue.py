"""Priority and the limit of 5 with the real QueuedRunCoordinator and its daemon, on Postgres, with dagster.yaml's
concurrency block; and a manual trigger launched end to end through a real code server."""

from __future__ import annotations

import datetime as dt

import dagster as dg
import pytest

from dagster._core.test_utils import create_test_daemon_workspace_context, poll_for_finished_run
from dagster._core.workspace.load_target import ModuleTarget
from dagster._daemon.run_coordinator.queued_run_coordinator_daemon import QueuedRunCoordinatorDaemon
from maintenance_jobs.dispatch import job_and_op, scheduled_run_request
from maintenance_jobs.models import Task
from maintenance_jobs.registry import create_task, get_task
from maintenance_jobs.resources import MaintenanceRegistryResource
from maintenance_jobs.sensors import record_finished_run
from maintenance_jobs.tags import TAG_OUTPUT, TAG_STATUS, TAG_TRIGGERED_BY
from maintenance_jobs.trigger import trigger_task
from orchestration_core.dagster_webserver import DagsterWebserverClient
from tests.conftest import REPO_ROOT
from tests.run_queue import dequeue, queued_instance, submit
from tests.task_rows import task_data

pytestmark = pytest.mark.integration

MINUTE = dt.datetime(2025, 6, 2, 15, 5, tzinfo=dt.UTC)


def task(name: str, priority: int) -> Task:
    now = dt.datetime.now(dt.UTC)
    return Task.model_validate(task_data(name, priority=priority) | {"id": priority, "created_at": now, "updated_at": now})


def launched_tasks(instance: dg.DagsterInstance) -> list[str]:
    return [run.tags.get("maintenance/task", run.job_name) for run in instance.run_launcher.queue()]


def test_five_maintenance_runs_start_by_priority_and_racing_is_never_queued_behind_them(
    mocked_launch_instance: dg.DagsterInstance,
) -> None:
    instance = mocked_launch_instance
    assert instance.get_concurrency_config().run_queue_config.tag_concurrency_limits[0]["limit"] == 5
    # 8 tasks due in the same minute, submitted in an order unrelated to their priority.
    priorities = {"p60": 60, "p5": 5, "p90": 90, "p20": 20, "p40": 40, "p1": 1, "p75": 75, "p30": 30}
    run_ids = {}
    for name, priority in priorities.items():
        request = scheduled_run_request(task(name, priority), MINUTE, "Pacific/Auckland")
        job, _ = job_and_op("example_executor")
        run_ids[name] = submit(instance, request.job_name, {**job.tags, **request.tags})

    dequeue(instance)
    assert launched_tasks(instance) == ["p1", "p5", "p20", "p30", "p40"]
    queued = instance.get_runs(filters=dg.RunsFilter(statuses=[dg.DagsterRunStatus.QUEUED]))
    assert sorted(r.tags["maintenance/task"] for r in queued) == ["p60", "p75", "p90"]

    # A racing run submitted while 5 maintenance runs are active launches at once.
    racing_id = submit(instance, "morning_scrape", {"orchestration/kind": "racing"})
    dequeue(instance)
    assert launched_tasks(instance)[-1] == "morning_scrape"
    assert instance.get_run_by_id(racing_id).status == dg.DagsterRunStatus.STARTING
    assert len(instance.get_runs(filters=dg.RunsFilter(statuses=[dg.DagsterRunStatus.QUEUED]))) == 3

    # When one maintenance run ends, exactly the next most urgent one starts.
    instance.report_run_failed(instance.get_run_by_id(run_ids["p20"]))
    dequeue(instance)
    assert launched_tasks(instance)[-1] == "p60"
    still_queued = instance.get_runs(filters=dg.RunsFilter(statuses=[dg.DagsterRunStatus.QUEUED]))
    assert sorted(r.tags["maintenance/task"] for r in still_queued) == ["p75", "p90"]


def test_manual_trigger_runs_for_real_through_the_code_location(
    dagster_database_url: str, dagster_webserver_url: str, registry_resource: MaintenanceRegistryResource
) -> None:
    engine = registry_resource.engine()
    stored = create_task(engine, task_data("manual_ping", config={"message": "pong", "delay_seconds": 0}))
    with queued_instance(dagster_database_url) as instance:
        instance.wipe()
        # Through the webserver's GraphQL API, as the control API does: the run gets the location's own origin.
        run_id = trigger_task(DagsterWebserverClient(dagster_webserver_url), stored)
        run = instance.get_run_by_id(run_id)
        assert run.status == dg.DagsterRunStatus.QUEUED
        assert run.tags[TAG_TRIGGERED_BY] == "manual" and run.tags["orchestration/kind"] == "maintenance"
        assert run.remote_job_origin.location_name == "maintenance_jobs"
        target = ModuleTarget(
            module_name="maintenance_jobs.definitions",
            attribute="defs",
            working_directory=str(REPO_ROOT),
            location_name="maintenance_jobs",
        )
        # The daemon dequeues it and the default launcher starts it on the location's gRPC code server.
        with create_test_daemon_workspace_context(target, instance) as workspace:
            with QueuedRunCoordinatorDaemon(interval_seconds=1) as daemon:
                list(daemon.run_iteration(workspace))
            finished = poll_for_finished_run(instance, run_id, timeout=120)
        assert finished.status == dg.DagsterRunStatus.SUCCESS
        assert finished.tags[TAG_OUTPUT] == "Example task completed: pong (waited 0s)"
        assert record_finished_run(instance, finished, registry_resource) == "success"
        assert instance.get_run_by_id(run_id).tags[TAG_STATUS] == "success"
    assert get_task(engine, "manual_ping").last_status == "success"
