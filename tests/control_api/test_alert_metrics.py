"""The alert rules' inputs as the running control API serves them, from real storage and real processes: sensor
ticks failed by Dagster's own sensor loop, a daemon whose sensors stopped ticking, a real code server pinged and
killed, registry tasks with their runs, retry numbers against each task's own max_retries."""

from __future__ import annotations

import logging
import re
import subprocess
import time
from collections.abc import Iterator
from contextlib import contextmanager

import dagster as dg
import pytest
import sqlalchemy as sa
from dagster._core.test_utils import create_run_for_test, freeze_time
from dagster._daemon.types import DaemonHeartbeat

from control_api.app import create_app
from platform_monitoring.liveness import CodeServer
from local_stack.stack import free_port
from tests.code_server import module_workspace, running_code_server
from tests.control_api.conftest import RunningApi, _dispose_storage_pools, answered, answered_health, serve
from tests.control_api.test_metrics_and_status import samples, value
from tests.orchestration_core.audit.run_factory import RunFactory
from tests.task_rows import task_body

pytestmark = [pytest.mark.api, pytest.mark.integration]


@contextmanager
def maintenance_location(instance: dg.DagsterInstance) -> Iterator[tuple]:
    """The maintenance_jobs location loaded the way the daemon loads it (a code server subprocess)."""
    with module_workspace(instance, "maintenance_jobs.definitions", "maintenance_jobs") as context:
        repository = context.create_request_context().get_code_location("maintenance_jobs").get_repository(
            "__repository__")
        yield context, repository


def sensor_iteration(context) -> None:
    from dagster._daemon.sensor import execute_sensor_iteration

    list(execute_sensor_iteration(context, logging.getLogger("sensor-test"), threadpool_executor=None,
                                  submit_threadpool_executor=None))


def beat_every_daemon(instance: dg.DagsterInstance, age: float = 5) -> None:
    for daemon in instance.get_required_daemon_types():
        instance.add_daemon_heartbeat(DaemonHeartbeat(time.time() - age, daemon, None, None))


def labelled(found: dict, metric: str, labels: dict[str, str]) -> float | None:
    return found.get((metric, tuple(sorted(labels.items()))))


def test_failed_ticks_of_a_real_sensor_are_counted_with_their_error(api: RunningApi, monkeypatch) -> None:
    """The dispatcher's database gone (a database that does not exist): Dagster's sensor loop fails three ticks a
    minute apart; /metrics counts three in a row, names the error, and a good tick resets the count."""
    instance = api.instance
    broken = sa.engine.make_url(api.registry_url).set(database="no_such_registry").render_as_string(False)
    monkeypatch.setenv("MAINTENANCE_DATABASE_URL", broken)  # what the code server subprocess reads
    labels = {"location": "maintenance_jobs", "type": "sensor", "name": "maintenance_dispatcher"}
    start = time.time() - 200
    with maintenance_location(instance) as (context, repository):
        instance.start_sensor(repository.get_sensor("maintenance_dispatcher"))
        for minute in range(3):
            with freeze_time(start + 61 * minute):
                sensor_iteration(context)
    found = samples(api.client(None).get("/metrics").text)
    assert labelled(found, "orchestration_instigator_failed_ticks_in_a_row", labels) == 3
    assert labelled(found, "orchestration_instigator_interval_seconds", labels) == 60
    assert labelled(found, "orchestration_instigator_running", {**labels, "default": "running"}) == 1
    [error] = [dict(key[1])["error"] for key in found if key[0] == "orchestration_instigator_last_error_info"
               and dict(key[1])["name"] == "maintenance_dispatcher"]
    assert 'database "no_such_registry" does not exist' in error and "postgresql://" not in error
    assert value(found, "maintenance_api_metrics_errors", source="instigators") == 0

    monkeypatch.setenv("MAINTENANCE_DATABASE_URL", api.registry_url)
    with maintenance_location(instance) as (context, _):
        with freeze_time(start + 61 * 3):
            sensor_iteration(context)
    found = samples(api.client(None).get("/metrics").text)
    assert labelled(found, "orchestration_instigator_failed_ticks_in_a_row", labels) == 0
    assert not [key for key in found if key[0] == "orchestration_instigator_last_error_info"
                and dict(key[1])["name"] == "maintenance_dispatcher"]


def test_a_daemon_that_has_not_beaten_since_the_api_started_counts_as_starting(api: RunningApi) -> None:
    """orchestration_daemon_starting, which holds DagsterDaemonDown back while the deployment starts: 1 while every
    heartbeat predates the control API (any earlier test's, or none), 0 from the first beat after it."""
    found = samples(api.client(None).get("/metrics").text)
    assert value(found, "orchestration_daemon_starting") == 1
    assert value(found, "orchestration_daemon_up") == 0
    beat_every_daemon(api.instance, age=0)
    found = samples(api.client(None).get("/metrics").text)
    assert value(found, "orchestration_daemon_starting") == 0


def test_a_daemon_whose_sensors_stopped_ticking_shows_down_within_30_s(api: RunningApi, monkeypatch) -> None:
    """Heartbeats are fresh (they come every 30 s), but the newest tick of the 15 s sensors is 40 s old: /health is
    degraded and says why, and orchestration_daemon_up is 0; a new tick brings both back."""
    instance = api.instance
    monkeypatch.setenv("MAINTENANCE_DATABASE_URL", api.registry_url)
    beat_every_daemon(instance)
    with maintenance_location(instance) as (context, repository):
        for name in ("maintenance_dispatcher", "maintenance_run_guard", "record_maintenance_failure",
                     "record_maintenance_canceled"):
            sensor = repository.get_sensor(name)
            instance.stop_sensor(sensor.get_remote_origin_id(), sensor.selector_id, sensor)
        instance.start_sensor(repository.get_sensor("record_maintenance_success"))  # 15 s
        frozen_at = time.monotonic()
        with freeze_time(time.time() - 40):
            sensor_iteration(context)
        health = answered_health(api)
        assert (health["status"], health["scheduler_running"]) == ("degraded", False), health
        # The tick is stamped 40 s back, and ages in real time while the iteration and the request run: on a loaded
        # host they took 30 s (seen: "no sensor tick for 70 s"), so the bound is what this test measured.
        ages = [int(found.group(1)) for p in health["daemon_problems"]
                if (found := re.fullmatch(r"no sensor tick for (\d+) s \(expected every 15 s\)", p))]
        assert len(ages) == 1, health["daemon_problems"]
        assert 40 <= ages[0] <= 40 + (time.monotonic() - frozen_at) + 1, health["daemon_problems"]
        assert value(samples(api.client(None).get("/metrics").text), "orchestration_daemon_up") == 0

        ticked_at = time.monotonic()
        sensor_iteration(context)
        health = answered_health(api)
        assert (health["status"], health["scheduler_running"], health["daemon_problems"]) == ("ok", True, []), health
        # The new tick, not the 40 s old one: no older than the time since it was made (a loaded host may take over
        # 15 s to answer; seen: 17.0 s).
        assert health["newest_sensor_tick_age_seconds"] <= time.monotonic() - ticked_at + 1, health
        assert daemon_up_after_a_new_tick(api, context) == 1


def daemon_up_after_a_new_tick(api: RunningApi, context, tries: int = 3) -> float:
    """orchestration_daemon_up answered within 30 s of a new tick (a 15 s sensor's tick counts as missed after 30 s):
    a /metrics answered later than that at load 15 reads 0, which is right. So the tick is made again, a
    few times, until one answer comes in time; a product that says 0 then fails."""
    took = []
    for _ in range(tries):
        beat_every_daemon(api.instance)
        ticked_at = time.monotonic()
        sensor_iteration(context)
        up = value(samples(api.client(None).get("/metrics").text), "orchestration_daemon_up")
        took.append(round(time.monotonic() - ticked_at, 1))
        if took[-1] < 30:
            return up
    raise AssertionError(f"no /metrics answer within 30 s of a tick in {tries} tries (took {took} s)")


@pytest.fixture
def code_server() -> Iterator[tuple[subprocess.Popen, int]]:
    with running_code_server() as (process, port):
        yield process, port


def test_code_servers_are_pinged_and_a_killed_one_shows_at_once(api_settings, pg_instance, code_server) -> None:
    process, port = code_server
    dead_port = free_port()
    settings = api_settings.model_copy(update={"code_servers": (
        CodeServer("maintenance_jobs", "127.0.0.1", port), CodeServer("racing_orchestration", "127.0.0.1", dead_port))})
    beat_every_daemon(pg_instance)
    server, thread = serve(create_app(settings), free_port())
    base = f"http://127.0.0.1:{server.servers[0].sockets[0].getsockname()[1]}"
    try:
        import httpx

        health = answered(lambda: httpx.get(f"{base}/health", timeout=30).json())
        assert health["code_servers"] == {"maintenance_jobs": "ok",
                                          "racing_orchestration": "unreachable (CodeServerNotServing)"}
        assert health["status"] == "degraded"
        found = samples(httpx.get(f"{base}/metrics", timeout=30).text)
        assert value(found, "orchestration_code_server_up", location="maintenance_jobs") == 1
        assert value(found, "orchestration_code_server_up", location="racing_orchestration") == 0

        process.kill()
        process.wait(timeout=30)
        killed_at = time.monotonic()
        while httpx.get(f"{base}/health", timeout=30).json()["code_servers"]["maintenance_jobs"] == "ok":
            assert time.monotonic() - killed_at < 30, "the killed code server still shows ok after 30 s"
            time.sleep(0.5)
        found = samples(httpx.get(f"{base}/metrics", timeout=30).text)
        assert value(found, "orchestration_code_server_up", location="maintenance_jobs") == 0
    finally:
        server.should_exit = True
        thread.join(timeout=10)
        _dispose_storage_pools(pg_instance)


def test_every_enabled_task_is_exported_with_its_interval_grace_and_last_success(api: RunningApi) -> None:
    with api.client() as client:
        for body in (task_body("every_minute", minute=-1, hour=-1, timeout_seconds=60, max_retries=0),
                     task_body("nightly_five", timeout_seconds=600, max_retries=5),
                     task_body("switched_off", enabled=False)):
            assert client.post("/tasks", json=body).status_code == 201, body
    instance = api.instance
    factory = RunFactory(instance)
    succeeded = factory.recorded(dg.DagsterRunStatus.SUCCESS, tags={"maintenance/task": "nightly_five"})
    factory.recorded(dg.DagsterRunStatus.FAILURE, tags={"maintenance/task": "every_minute"})  # not a success
    found = samples(api.client(None).get("/metrics").text)
    every = {"task": "every_minute", "executor": "example_executor"}
    nightly = {"task": "nightly_five", "executor": "example_executor"}
    assert value(found, "maintenance_task_expected_interval_seconds", **every) == 60
    assert value(found, "maintenance_task_grace_seconds", **every) == 60 + 60
    assert value(found, "maintenance_task_expected_interval_seconds", **nightly) == 86400
    assert value(found, "maintenance_task_grace_seconds", **nightly) == 600 * 6 + 3600
    assert value(found, "maintenance_task_last_success_timestamp_seconds", **every) is None  # never succeeded
    assert abs(value(found, "maintenance_task_created_timestamp_seconds", **every) - time.time()) < 120
    record = instance.get_run_record_by_id(succeeded.run_id)
    assert value(found, "maintenance_task_last_success_timestamp_seconds", **nightly) == record.end_time
    assert not [key for key in found if dict(key[1]).get("task") == "switched_off"]
    # Each task's own run retry limit, and each job's step retry policy.
    assert value(found, "orchestration_run_retry_limit", job="example_executor", task="nightly_five") == 5
    assert value(found, "orchestration_run_retry_limit", job="example_executor", task="every_minute") == 0
    default = instance.run_retries_max_retries if instance.run_retries_enabled else 0  # the instance's run_retries
    assert value(found, "orchestration_run_retry_limit", job="morning_scrape", task="") == default
    assert value(found, "orchestration_step_retry_limit", job="morning_scrape") == 3


def test_run_retry_numbers_are_exported_per_task(api: RunningApi) -> None:
    instance = api.instance
    for number in (1, 4):
        create_run_for_test(instance, job_name="example_executor", status=dg.DagsterRunStatus.FAILURE,
                            tags={"maintenance/task": "nightly_five", "dagster/retry_number": str(number)})
    create_run_for_test(instance, job_name="morning_scrape", status=dg.DagsterRunStatus.SUCCESS,
                        tags={"dagster/retry_number": "1"})
    found = samples(api.client(None).get("/metrics").text)
    for window in ("1h", "24h"):
        assert value(found, "orchestration_run_retry_highest", job="example_executor", task="nightly_five",
                     window=window) == 4
        assert value(found, "orchestration_run_retry_highest", job="morning_scrape", task="", window=window) == 1


def test_the_step_retry_highest_number_per_job(api: RunningApi) -> None:
    from tests.control_api.test_metrics_and_status import flaky_job

    assert flaky_job.execute_in_process(instance=api.instance).success  # two retries
    found = samples(api.client(None).get("/metrics").text)
    assert value(found, "orchestration_step_retry_highest", job="flaky_job", window="1h") == 2


def test_newest_ticks_are_what_dagster_returns(pg_instance: dg.DagsterInstance) -> None:
    """The control API's one-query tick read (index walk per instigator) against Dagster's own, on Postgres."""
    from platform_monitoring.dagster_storage import newest_ticks
    from dagster._core.scheduler.instigation import TickData, TickStatus

    from dagster._core.scheduler.instigation import InstigatorType

    now = time.time()
    for key, count in (("selector-a", 5), ("selector-b", 1)):
        for i in range(count):
            pg_instance.create_tick(TickData(
                instigator_origin_id=key, instigator_name=key, instigator_type=InstigatorType.SENSOR,
                status=TickStatus.SKIPPED, timestamp=now - 100 + (i * 7) % 30, selector_id=key,
                skip_reason="nothing due"))
    keys = ["selector-a", "selector-b", "selector-none"]
    for limit in (1, 2, 3):
        ours = {k: [t.tick_id for t in v] for k, v in newest_ticks(pg_instance, keys, limit).items()}
        theirs = {k: [t.tick_id for t in v] for k, v in pg_instance.get_batch_ticks(keys, limit=limit).items() if v}
        assert ours == theirs and len(ours["selector-a"]) == limit
    # What the SQL read parses of each tick is what Dagster reads.
    [ours] = newest_ticks(pg_instance, ["selector-b"], 1)["selector-b"]
    [theirs] = pg_instance.get_ticks("selector-b", "selector-b", limit=1)
    assert (ours.status.value, ours.timestamp) == (theirs.status.value, theirs.timestamp)
    assert newest_ticks(pg_instance, [], 2) == {}


@pytest.mark.parametrize(
    ("health", "overran"),
    [
        ({"status": "ok", "registry_database": "ok", "code_servers": {"racing_orchestration": "ok"}}, []),
        ({"status": "unavailable", "registry_database": "timed out after 0.8 s"}, ["registry_database"]),
        ({"schedules_and_sensors_state": "timed out after 0.8 s", "code_servers": {
            "maintenance_jobs": "timed out after 0.8 s", "racing_orchestration": "unreachable (Error)"}},
         ["code_servers.maintenance_jobs", "schedules_and_sensors_state"]),
    ],
)
def test_a_health_sample_whose_probe_overran_is_asked_again(health: dict, overran: list[str]) -> None:
    from tests.control_api.conftest import probes_overran

    assert probes_overran(health) == overran
