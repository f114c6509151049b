"""Maintenance runs that die for infrastructure reasons: Dagster's own run retries (the real auto re-execution daemon
iteration, dagster.yaml's run_retries and run_monitoring blocks, a real code server) and the guard sensor on top,
on Postgres, with a fake clock for the guard and for run monitoring's start timeout."""

from __future__ import annotations

import datetime as dt
import logging
import time
from collections.abc import Iterator
from pathlib import Path

import dagster as dg
import pytest
import yaml
from dagster._core.events import JobFailureData, RunFailureReason
from dagster._core.events.log import EventLogEntry
from dagster._core.test_utils import create_test_daemon_workspace_context
from dagster._core.workspace.load_target import ModuleTarget
from dagster._daemon.auto_run_reexecution.event_log_consumer import (
    EventLogConsumerDaemon,
)
from dagster._daemon.monitoring import run_monitoring

from control_api.executions import ExecutionQuery, list_executions
from maintenance_jobs import sensors
from maintenance_jobs.definitions import defs
from maintenance_jobs.dispatch import scheduled_run_request
from maintenance_jobs.jobs import MAINTENANCE_JOBS, plugin_executor_job
from maintenance_jobs.registry import create_task, get_task
from maintenance_jobs.resources import MaintenanceRegistryResource
from orchestration_core.audit.alert_webhook import AlertWebhook
from tests.maintenance_jobs.job_origins import job_origins
from tests.orchestration_core.audit.conftest import CapturedWebhook
from tests.task_rows import task_data
from tests.conftest import pooled_postgres_storage

pytestmark = pytest.mark.integration

REPO_ROOT = Path(__file__).resolve().parents[2]
DAGSTER_YAML = yaml.safe_load((REPO_ROOT / "dagster.yaml").read_text())
MINUTE = dt.datetime(2025, 6, 2, 15, 5, tzinfo=dt.UTC)
TZ = "Pacific/Auckland"
S = dg.DagsterRunStatus
WILL_RETRY = "dagster/will_retry"
# The guard's tags (maintenance_jobs/tags.py), spelled out so that this file runs against code without the guard.
TAG_VERDICT, TAG_RELAUNCH_OF, TAG_RELAUNCH_NUMBER = (
    "maintenance/guard_verdict", "maintenance/relaunch_of", "maintenance/relaunch_number")


# ---- against Dagster's real retry daemon and run monitoring ----

@pytest.fixture(scope="module")
def module_instance(dagster_database_url: str) -> Iterator[dg.DagsterInstance]:
    """Postgres storage with dagster.yaml's run queue, run retries and run monitoring blocks."""
    overrides = {
        "storage": pooled_postgres_storage(dagster_database_url),
        "run_coordinator": {"module": "dagster._core.run_coordinator", "class": "QueuedRunCoordinator"},
        "run_retries": DAGSTER_YAML["run_retries"],
        "run_monitoring": DAGSTER_YAML["run_monitoring"],
    }
    with dg.instance_for_test(overrides=overrides) as inst:
        yield inst


@pytest.fixture(scope="module")
def module_workspace(module_instance: dg.DagsterInstance):
    """One code server for the module's tests: starting it (a process importing Dagster and the location) cost each
    test ~2 CPU-s; its definitions do not change between tests."""
    target = ModuleTarget(module_name="maintenance_jobs.definitions", attribute="defs",
                          working_directory=str(REPO_ROOT), location_name="maintenance_jobs")
    with create_test_daemon_workspace_context(target, module_instance) as context:
        yield context


@pytest.fixture
def instance(module_instance: dg.DagsterInstance) -> dg.DagsterInstance:
    """The module's instance, emptied for each test: runs, events and daemon heartbeats (`wipe`), sensor states and
    ticks (the guard's cursor)."""
    module_instance.wipe()
    module_instance.wipe_all_schedules()
    return module_instance


@pytest.fixture
def workspace(instance: dg.DagsterInstance, module_workspace):
    return module_workspace


class Clock:
    """The guard's clock, starting at the real time (run storage stamps runs with it), moved by hand."""

    def __init__(self) -> None:
        self.now = dt.datetime.now(dt.UTC)

    def advance(self, **delta: float) -> None:
        self.now += dt.timedelta(**delta)


@pytest.fixture
def clock(monkeypatch: pytest.MonkeyPatch) -> Clock:
    fake = Clock()
    monkeypatch.setattr(sensors, "utc_now", lambda: fake.now)
    return fake


class Deployment:
    """The daemon's parts these tests drive: auto re-execution, run monitoring, the sensor's launches."""

    def __init__(self, instance, workspace, registry: MaintenanceRegistryResource, alerts: AlertWebhook,
                 monkeypatch: pytest.MonkeyPatch) -> None:
        self.instance, self.workspace, self.registry, self.alerts = instance, workspace, registry, alerts
        self.monkeypatch = monkeypatch
        self.retry_daemon = EventLogConsumerDaemon()
        self.retry_iteration()  # its first iteration sets the event cursor (older failures are never retried)

    def scheduled_run(self, task_name: str, minute: dt.datetime = MINUTE) -> dg.DagsterRun:
        request = scheduled_run_request(get_task(self.registry.engine(), task_name), minute, TZ)
        return self.launch(request, sensor_name="maintenance_dispatcher")

    def launch(self, request: dg.RunRequest, sensor_name: str) -> dg.DagsterRun:
        """What the sensor daemon does with a request: skip a run key any run has, else create and queue the run."""
        taken = self.instance.get_runs(dg.RunsFilter(tags={"dagster/run_key": request.run_key}))
        assert not taken, f"run key {request.run_key} requested twice"
        job = next(j for j in MAINTENANCE_JOBS if j.name == request.job_name)
        remote, python = job_origins(request.job_name)
        # With its job and execution plan snapshots, as a launched run has them (Dagster's retries need the plan).
        run = self.instance.create_run_for_job(
            job, run_config=request.run_config,
            tags={**job.tags, **request.tags, "dagster/run_key": request.run_key, "dagster/sensor_name": sensor_name},
            status=S.NOT_STARTED, remote_job_origin=remote, job_code_origin=python,
        )
        self.instance.submit_run(run.run_id, workspace=None)
        return self.instance.get_run_by_id(run.run_id)

    def retry_iteration(self) -> None:
        list(self.retry_daemon.run_iteration(self.workspace))

    def times_out_starting(self, run: dg.DagsterRun) -> None:
        """The run is launched but its worker never starts (e.g. cannot reach Postgres); run monitoring fails it."""
        self.instance.report_dagster_event(
            dg.DagsterEvent(event_type_value=dg.DagsterEventType.RUN_STARTING.value, job_name=run.job_name),
            run_id=run.run_id,
        )
        launched = self.instance.get_run_stats(run.run_id).launch_time
        timeout = self.instance.run_monitoring_start_timeout_seconds
        self.monkeypatch.setattr(run_monitoring, "get_current_timestamp", lambda: launched + timeout + 1)
        record = self.instance.get_run_record_by_id(run.run_id)
        run_monitoring.monitor_starting_run(self.instance, record, logging.getLogger("test"))

    def dies_mid_run(self, run: dg.DagsterRun) -> None:
        """Its op started, then the worker lost the database: the step ends without success or failure event."""
        for event_type in (dg.DagsterEventType.RUN_START, dg.DagsterEventType.STEP_START):
            self.instance.report_dagster_event(
                dg.DagsterEvent(event_type_value=event_type.value, job_name=run.job_name,
                                step_key=None if event_type == dg.DagsterEventType.RUN_START else "run_example_executor"),
                run_id=run.run_id,
            )
        self.instance.report_run_failed(
            self.instance.get_run_by_id(run.run_id),
            "Step run_example_executor finished without success or failure event.",
            JobFailureData(error=None, failure_reason=RunFailureReason.RUN_EXCEPTION),
        )

    def fails_at_dequeue(self, run: dg.DagsterRun) -> None:
        """The queue daemon's unrecoverable dequeue error ("too many retries for DB connection"): failed, no reason."""
        self.instance.report_run_failed(self.instance.get_run_by_id(run.run_id))

    def guard(self) -> list[dg.RunRequest]:
        """One tick of every sensor of the location that may re-launch or report a run: all but the dispatcher (the
        schedule's requests) and the run-status sensors (they record results in the registry)."""
        context = dg.build_sensor_context(
            instance=self.instance,
            resources={"maintenance_registry": self.registry, "alert_webhook": self.alerts},
        )
        requests: list[dg.RunRequest] = []
        for sensor in defs.sensors:
            if sensor.name != "maintenance_dispatcher" and not isinstance(sensor, dg.RunStatusSensorDefinition):
                requests += sensor.evaluate_tick(context).run_requests or []
        return requests

    def guard_and_launch(self) -> list[dg.DagsterRun]:
        return [self.launch(r, "maintenance_run_guard") for r in self.guard()]

    def runs_of(self, task_name: str) -> list[dg.DagsterRun]:
        return list(reversed(self.instance.get_runs(dg.RunsFilter(tags={"maintenance/task": task_name}))))


@pytest.fixture
def deployment(instance, workspace, registry_resource: MaintenanceRegistryResource, webhook: CapturedWebhook,
               clock: Clock, monkeypatch: pytest.MonkeyPatch) -> Deployment:
    engine = registry_resource.engine()
    create_task(engine, task_data("nightly_no_retries", max_retries=0))
    create_task(engine, task_data("nightly_one_retry", max_retries=1))
    return Deployment(instance, workspace, registry_resource, AlertWebhook(url=webhook.url, retry_delay_seconds=0),
                      monkeypatch)


def test_a_run_that_timed_out_starting_is_relaunched_though_dagster_does_not_retry_it(
    deployment: Deployment, clock: Clock
) -> None:
    first = deployment.scheduled_run("nightly_no_retries")
    deployment.times_out_starting(first)
    deployment.retry_iteration()
    failed = deployment.instance.get_run_by_id(first.run_id)
    assert failed.status == S.FAILURE and failed.tags["dagster/failure_reason"] == "START_TIMEOUT"
    assert failed.tags[WILL_RETRY] == "false"  # max_retries 0: Dagster leaves it there
    assert [r.run_id for r in deployment.runs_of("nightly_no_retries")] == [first.run_id]

    clock.advance(minutes=1)
    [relaunch] = deployment.guard_and_launch()

    assert relaunch.tags["dagster/run_key"] == f"nightly_no_retries:relaunch:{first.run_id}"
    assert relaunch.tags[TAG_RELAUNCH_OF] == first.run_id and relaunch.tags[TAG_RELAUNCH_NUMBER] == "1"
    assert relaunch.tags["maintenance/triggered_by"] == "retry"
    assert relaunch.tags["maintenance/scheduled_minute"] == first.tags["maintenance/scheduled_minute"]
    assert relaunch.status == S.QUEUED
    clock.advance(minutes=1)
    assert deployment.guard_and_launch() == []  # recorded, not requested twice
    recorded = deployment.instance.get_run_by_id(first.run_id).tags
    assert recorded[TAG_VERDICT] == "relaunched"
    assert f"re-launched as run {relaunch.run_id}" in recorded["racing/error"]
    assert "START_TIMEOUT" in recorded["racing/error"]


def test_the_outage_that_lost_a_run_and_its_retry_relaunches_it_bounded_then_alerts(
    deployment: Deployment, clock: Clock, webhook: CapturedWebhook
) -> None:
    """The measured incident: a run dies mid-run, Dagster's retry fails at dequeue, nothing else happened."""
    task = "nightly_one_retry"
    first = deployment.scheduled_run(task)
    deployment.dies_mid_run(first)
    assert deployment.guard_and_launch() == []  # Dagster said it will retry: the guard waits for it
    deployment.retry_iteration()
    [_, retry] = deployment.runs_of(task)
    assert retry.parent_run_id == first.run_id and retry.status == S.QUEUED
    deployment.fails_at_dequeue(retry)
    deployment.retry_iteration()
    assert deployment.instance.get_run_by_id(retry.run_id).tags[WILL_RETRY] == "false"  # max_retries 1 used up
    assert len(deployment.runs_of(task)) == 2  # this is where the old code left it, silently

    lost: list[dg.DagsterRun] = []
    for relaunch_number in (1, 2):
        clock.advance(minutes=1)
        [relaunch] = deployment.guard_and_launch()
        assert relaunch.tags[TAG_RELAUNCH_NUMBER] == str(relaunch_number)
        # The outage goes on: the re-launch dies too, and so does Dagster's retry of it.
        deployment.times_out_starting(relaunch)
        deployment.retry_iteration()
        relaunch_retry = deployment.runs_of(task)[-1]
        assert relaunch_retry.parent_run_id == relaunch.run_id
        assert relaunch_retry.tags[TAG_RELAUNCH_NUMBER] == str(relaunch_number)  # copied: the bound holds
        deployment.fails_at_dequeue(relaunch_retry)
        deployment.retry_iteration()
        lost.append(relaunch_retry)

    clock.advance(minutes=1)
    assert deployment.guard_and_launch() == []  # the bound: 2 re-launches
    assert len(deployment.runs_of(task)) == 6
    [alert] = webhook.posts
    assert alert["text"].startswith(f"Maintenance run lost: {task}")
    assert lost[-1].run_id in alert["text"] and "already re-launched 2 times" in alert["text"]
    outcomes = {r.run_id: r.tags.get(TAG_VERDICT) for r in deployment.runs_of(task)}
    assert list(outcomes.values()) == ["dagster_retried", "relaunched", "dagster_retried", "relaunched",
                                       "dagster_retried", "reported"]
    # GET /executions shows every run of the chain with what happened to it.
    page = list_executions(deployment.instance, deployment.registry.engine(), ExecutionQuery(task_name=task),
                           "http://dagster.test")
    newest = page.items[0]
    assert newest.run_id == lost[-1].run_id and newest.status == "failed"
    assert "already re-launched 2 times" in newest.error and "died before its op started" in newest.error
    assert all(item.error for item in page.items)
    clock.advance(minutes=1)
    deployment.guard()
    assert len(webhook.posts) == 1  # reported once


def fails_while_the_retry_daemon_reads(deployment: Deployment, run: dg.DagsterRun) -> None:
    """The run worker's failure, with Dagster's retry daemon reading in between its writes. A worker writes the
    RUN_FAILURE event, then the run's status, then `dagster/will_retry` (DagsterInstance.handle_new_event, three
    commits); the daemon's event consumer that reads in between sees a failure event of a run still STARTED and
    without the tag, decides "no retry" and moves its cursor past the event for good. Seen in the production form:
    two tasks failed at the same second, one was retried, the other never (tests/production)."""
    deployment.instance.report_dagster_event(
        dg.DagsterEvent(event_type_value=dg.DagsterEventType.RUN_START.value, job_name=run.job_name), run_id=run.run_id)
    failure = dg.DagsterEvent(event_type_value=dg.DagsterEventType.RUN_FAILURE.value, job_name=run.job_name,
                              message="Execution of run failed.",
                              event_specific_data=JobFailureData(error=None,
                                                                 failure_reason=RunFailureReason.STEP_FAILURE))
    entry = EventLogEntry(error_info=None, level=logging.ERROR, user_message="", run_id=run.run_id,
                          timestamp=time.time(), job_name=run.job_name, dagster_event=failure)
    deployment.instance.event_log_storage.store_event(entry)  # 1: the event
    deployment.retry_iteration()  # the daemon reads here
    deployment.instance.run_storage.handle_run_event(run.run_id, failure,  # 2: the status
                                                     dt.datetime.fromtimestamp(entry.timestamp, dt.UTC))
    deployment.instance.add_run_tags(run.run_id, {WILL_RETRY: "true"})  # 3: the tag (max_retries 1, none used)


def test_a_retry_dagster_dropped_is_made_by_the_guard_once_as_dagster_would(
    deployment: Deployment, clock: Clock
) -> None:
    task = "nightly_one_retry"
    first = deployment.scheduled_run(task)
    fails_while_the_retry_daemon_reads(deployment, first)
    deployment.retry_iteration()
    failed = deployment.instance.get_run_by_id(first.run_id)
    assert failed.status == S.FAILURE and failed.tags[WILL_RETRY] == "true"
    assert [r.run_id for r in deployment.runs_of(task)] == [first.run_id]  # Dagster promised a retry, made none

    clock.advance(minutes=1)  # the guard's next tick: the daemon's cursor is past the failure, so no retry will come
    assert deployment.guard_and_launch() == []  # not a new run of the task: Dagster's retry, in the same run group
    [_, retry] = deployment.runs_of(task)
    assert retry.parent_run_id == first.run_id and retry.root_run_id == first.run_id
    assert retry.tags["dagster/retry_number"] == "1" and retry.tags["dagster/parent_run_id"] == first.run_id
    assert retry.tags["maintenance/task"] == task and retry.tags["dagster/max_retries"] == "1"
    assert retry.status == S.QUEUED and retry.execution_plan_snapshot_id == first.execution_plan_snapshot_id
    assert WILL_RETRY not in retry.tags and "maintenance/guard_verdict" not in retry.tags
    recorded = deployment.instance.get_run_by_id(first.run_id).tags
    assert recorded["dagster/auto_retry_run_id"] == retry.run_id and recorded[TAG_VERDICT] == "retried"

    # Once: neither Dagster's daemon nor the guard makes a second one.
    deployment.retry_iteration()
    clock.advance(minutes=10)
    assert deployment.guard_and_launch() == []
    assert len(deployment.runs_of(task)) == 2
    # The retry counts against max_retries as Dagster's own does: when it fails too, Dagster retries no more.
    deployment.dies_mid_run(retry)
    deployment.retry_iteration()
    assert deployment.instance.get_run_by_id(retry.run_id).tags[WILL_RETRY] == "false"
    assert len(deployment.runs_of(task)) == 2


def test_the_guard_waits_while_dagsters_daemon_has_not_read_the_failure(deployment: Deployment, clock: Clock) -> None:
    """A failure the daemon has not reached yet (its cursor is behind it, e.g. the daemon is busy or restarting) is
    Dagster's to retry: the guard leaves it for up to 5 minutes."""
    task = "nightly_one_retry"
    first = deployment.scheduled_run(task)
    deployment.dies_mid_run(first)  # no retry iteration: the daemon has not read it
    for _ in range(4):
        clock.advance(minutes=1)
        assert deployment.guard_and_launch() == []
        assert len(deployment.runs_of(task)) == 1
    deployment.retry_iteration()  # Dagster's own retry
    [_, retry] = deployment.runs_of(task)
    assert retry.parent_run_id == first.run_id
    clock.advance(minutes=1)
    assert deployment.guard_and_launch() == []
    assert deployment.instance.get_run_by_id(first.run_id).tags[TAG_VERDICT] == "dagster_retried"
    assert len(deployment.runs_of(task)) == 2


def test_a_failure_the_op_reported_is_left_to_the_task(deployment: Deployment, clock: Clock) -> None:
    # The plug-in op reports a missing plug-in as the task's failure (dg.Failure), as every executor op does.
    request = scheduled_run_request(get_task(deployment.registry.engine(), "nightly_no_retries"), MINUTE, TZ)
    op_config = {"executor": "no_such_plugin", "config_json": "{}"}
    result = plugin_executor_job.execute_in_process(
        run_config={"ops": {"run_plugin_executor": {"config": op_config}}}, instance=deployment.instance,
        tags=request.tags, raise_on_error=False,
    )
    assert not result.success
    assert deployment.instance.get_run_by_id(result.run_id).tags["racing/outcome"] == "failed"
    clock.advance(minutes=10)
    assert deployment.guard_and_launch() == []
    tags = deployment.instance.get_run_by_id(result.run_id).tags
    assert tags[TAG_VERDICT] == "task_failure"
    assert "no_such_plugin" in tags["racing/error"] and "died" not in tags["racing/error"]  # the op's own error


def test_reported_without_a_webhook_is_still_visible(deployment: Deployment, clock: Clock) -> None:
    deployment.alerts = AlertWebhook()  # ALERT_WEBHOOK_URL unset
    run = deployment.scheduled_run("nightly_no_retries")
    deployment.dies_mid_run(run)  # max_retries 0 and its op had started: not repeated
    deployment.retry_iteration()
    clock.advance(minutes=1)
    assert deployment.guard() == []
    tags = deployment.instance.get_run_by_id(run.run_id).tags
    assert tags[TAG_VERDICT] == "reported"
    assert "max_retries is 0" in tags["racing/error"] and "alerts disabled" in tags["racing/error"]



def test_a_lost_run_a_later_run_of_the_task_covers_is_neither_relaunched_nor_alerted(
    deployment: Deployment, clock: Clock, webhook: CapturedWebhook
) -> None:
    """A daemon that was down for hours finds an old dead run when the task's next scheduled run is already queued:
    repeating the old one would do the task's work twice, and its loss would be a false alarm."""
    lost = deployment.scheduled_run("nightly_no_retries")
    deployment.dies_mid_run(lost)  # alone, this is reported (max_retries 0, its op had started)
    deployment.retry_iteration()
    later = deployment.scheduled_run("nightly_no_retries", MINUTE + dt.timedelta(days=1))
    assert later.status == S.QUEUED

    clock.advance(minutes=1)
    assert deployment.guard_and_launch() == []
    assert webhook.posts == []
    tags = deployment.instance.get_run_by_id(lost.run_id).tags
    assert tags[TAG_VERDICT] == "superseded"
    assert f"a later run of the task, {later.run_id}, covers it" in tags["racing/error"]
    clock.advance(minutes=1)
    assert deployment.guard_and_launch() == [] and webhook.posts == []  # decided once


def test_a_later_run_that_failed_too_does_not_cover_a_lost_run(
    deployment: Deployment, clock: Clock, webhook: CapturedWebhook
) -> None:
    lost = deployment.scheduled_run("nightly_no_retries")
    deployment.dies_mid_run(lost)
    deployment.retry_iteration()
    later = deployment.scheduled_run("nightly_no_retries", MINUTE + dt.timedelta(days=1))
    deployment.dies_mid_run(later)
    deployment.retry_iteration()

    clock.advance(minutes=1)
    assert deployment.guard_and_launch() == []
    assert {deployment.instance.get_run_by_id(r.run_id).tags[TAG_VERDICT] for r in (lost, later)} == {"reported"}
    assert len(webhook.posts) == 2
