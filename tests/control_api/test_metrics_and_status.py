"""`/metrics` parsed with the Prometheus parser and checked against the runs created; `/stats`; `/schedulers`."""

from __future__ import annotations

import datetime as dt
import time

import dagster as dg
import pytest
import sqlalchemy as sa
from dagster._core.test_utils import create_run_for_test
from dagster._daemon.types import DaemonHeartbeat
from prometheus_client.parser import text_string_to_metric_families

from control_api import container_probe
from control_api.app import create_app
from control_api.config import ApiSettings
from maintenance_jobs.jobs import example_executor_job
from tests.maintenance_jobs.job_origins import job_origins
from local_stack.stack import free_port
from racing_orchestration.race_db import upgrade as upgrade_race_db
from racing_orchestration.race_db.schema import scrapes
from tests.control_api.conftest import API_KEY, RunningApi, _dispose_storage_pools, answered_health, serve
from tests.task_rows import task_body

pytestmark = [pytest.mark.api, pytest.mark.integration]
S = dg.DagsterRunStatus

_attempts: dict[str, int] = {}


@dg.op(retry_policy=dg.RetryPolicy(max_retries=3))
def flaky(context):
    # Fails on the first two attempts: two STEP_RESTARTED events (retry 1 and retry 2).
    if context.retry_number < 2:
        raise RuntimeError("transient")
    return context.retry_number


@dg.job
def flaky_job():
    flaky()


def samples(text: str) -> dict[tuple[str, tuple], float]:
    found = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            found[(sample.name, tuple(sorted(sample.labels.items())))] = sample.value
    return found


def value(found: dict, name: str, **labels: str) -> float | None:
    return found.get((name, tuple(sorted(labels.items()))))


def outcome_run(instance, job: str, status, outcome: str | None = None, **tags: str) -> str:
    if outcome:
        tags = {"racing/outcome": outcome, **tags}
    return create_run_for_test(instance, job_name=job, status=status, tags=tags).run_id


def test_metrics_match_the_runs_created(api: RunningApi) -> None:
    instance = api.instance
    for _ in range(3):
        outcome_run(instance, "morning_scrape", S.SUCCESS, "success",
                    **{"racing/items_processed": "10", "racing/items_failed": "0"})
    for _ in range(2):
        outcome_run(instance, "morning_scrape", S.FAILURE, "failed",
                    **{"racing/items_processed": "0", "racing/items_failed": "4"})
    outcome_run(instance, "morning_scrape", S.SUCCESS, "partial",
                **{"racing/items_processed": "7", "racing/items_failed": "2"})
    outcome_run(instance, "morning_scrape", S.FAILURE, None, **{"dagster/retry_number": "1"})
    outcome_run(instance, "post_race_t5", S.STARTED)
    remote, python = job_origins("example_executor")
    for kind in ("maintenance", "maintenance", "racing"):
        create_run_for_test(instance, job_name="example_executor", status=S.QUEUED,
                            tags={"orchestration/kind": kind}, remote_job_origin=remote, job_code_origin=python)
    real = example_executor_job.execute_in_process(
        run_config={"ops": {"run_example_executor": {"config": {"message": "m", "delay_seconds": 0.1}}}},
        instance=instance,
    )
    flaky_job.execute_in_process(instance=instance)
    instance.add_daemon_heartbeat(DaemonHeartbeat(time.time() - 12, "SENSOR", None, None))
    api.client().post("/tasks", json=task_body("extra"))  # seeds the registry, then adds one

    text = api.client(None).get("/metrics").text  # public: no key needed
    found = samples(text)
    runs = "orchestration_runs"
    assert value(found, runs, job="morning_scrape", outcome="success", window="24h") == 3
    assert value(found, runs, job="morning_scrape", outcome="failed", window="24h") == 3
    assert value(found, runs, job="morning_scrape", outcome="partial", window="24h") == 1
    assert value(found, runs, job="morning_scrape", outcome="partial", window="1h") == 1
    assert value(found, runs, job="post_race_t5", outcome="started", window="24h") == 1
    assert value(found, runs, job="example_executor", outcome="success", window="24h") == 1
    assert value(found, "orchestration_run_retries", job="morning_scrape", retry_number="1", window="24h") == 1
    assert value(found, "orchestration_items_processed", job="morning_scrape", window="24h") == 37
    assert value(found, "orchestration_items_failed", job="morning_scrape", window="1h") == 10
    assert value(found, "orchestration_active_runs", job="post_race_t5") == 1
    assert value(found, "orchestration_queued_runs", kind="maintenance") == 2
    assert value(found, "orchestration_queued_runs", kind="racing") == 1
    assert value(found, "orchestration_queued_runs", kind="other") == 0
    assert value(found, "orchestration_step_retries", job="flaky_job", retry_number="1", window="24h") == 1
    assert value(found, "orchestration_step_retries", job="flaky_job", retry_number="2", window="1h") == 1
    assert value(found, "orchestration_step_retries", job="flaky_job", retry_number="3", window="24h") is None
    duration = "orchestration_run_duration_seconds"
    assert value(found, f"{duration}_count", job="example_executor") == 1
    record = instance.get_run_record_by_id(real.run_id)
    took = record.end_time - record.start_time
    assert value(found, f"{duration}_sum", job="example_executor") == pytest.approx(took)
    bounds = [1, 5, 15, 30, 60, 120, 300, 600, 1800, 3600, 7200]
    first = next(b for b in bounds if took <= b)
    assert value(found, f"{duration}_bucket", job="example_executor", le=f"{float(first)}") == 1
    below = [b for b in bounds if b < first]
    if below:
        assert value(found, f"{duration}_bucket", job="example_executor", le=f"{float(below[-1])}") == 0
    assert value(found, f"{duration}_bucket", job="example_executor", le="+Inf") == 1
    assert value(found, "orchestration_last_success_timestamp_seconds", job="example_executor") == pytest.approx(
        record.end_time)
    age = value(found, "orchestration_daemon_heartbeat_age_seconds", daemon_type="SENSOR")
    assert 12 <= age < 60
    assert value(found, "maintenance_tasks_enabled") == 5  # 4 of the 5 seeded (the example is disabled) + 1
    assert value(found, "maintenance_concurrent_limit") == 5
    assert value(found, "maintenance_api_metrics_errors", source="tab_requests") == 0  # no race DB configured
    assert value(found, "maintenance_api_requests_total", method="GET", route="/metrics", status="200") is None


def test_tab_requests_and_request_counter(registry_url: str, pg_instance: dg.DagsterInstance,
                                          dagster_database_url: str) -> None:
    upgrade_race_db(registry_url)
    engine = sa.create_engine(registry_url)
    now = dt.datetime.now(dt.UTC)
    with engine.begin() as conn:
        for i, (endpoint, outcome, minutes) in enumerate(
            [("meetings", "ok", 5), ("meetings", "ok", 90), ("events", "error", 10), ("events", "ok", 60 * 30)]
        ):
            conn.execute(scrapes.insert().values(
                call_key=f"k{i}", endpoint=endpoint, params={}, outcome=outcome, duration_ms=5.0, attempts=1,
                items=1, started_at=now - dt.timedelta(minutes=minutes)))
    engine.dispose()
    settings = ApiSettings(registry_url=registry_url, api_key=API_KEY, dagster_database_url=dagster_database_url,
                           racing_database_url=registry_url)
    server, thread = serve(create_app(settings), free_port())
    base = f"http://127.0.0.1:{server.servers[0].sockets[0].getsockname()[1]}"
    try:
        import httpx

        headers = {"Authorization": f"Bearer {API_KEY}"}
        # What the answers say is under test here, not how fast they come (a 5 s read timed out at load 15).
        httpx.get(f"{base}/tasks/seen-task", headers=headers, timeout=60)
        httpx.get(f"{base}/tasks", timeout=60)  # 401
        found = samples(httpx.get(f"{base}/metrics", timeout=60).text)
    finally:
        server.should_exit = True
        thread.join(timeout=10)
        _dispose_storage_pools(pg_instance)
    tab = "orchestration_tab_api_requests"
    assert value(found, tab, endpoint="meetings", outcome="ok", window="1h") == 1
    assert value(found, tab, endpoint="meetings", outcome="ok", window="24h") == 2
    assert value(found, tab, endpoint="events", outcome="error", window="1h") == 1
    assert value(found, tab, endpoint="events", outcome="ok", window="24h") is None  # 30 h old
    requests = "maintenance_api_requests_total"
    # Route templates, not raw paths: task names never become label values.
    assert value(found, requests, method="GET", route="/tasks/{task_name}", status="404") == 1
    assert value(found, requests, method="GET", route="/tasks", status="401") is None
    assert value(found, requests, method="GET", route="unmatched", status="401") == 1


def test_stats_counts_maintenance_runs_of_the_last_24h(api: RunningApi) -> None:
    instance = api.instance
    kind = {"orchestration/kind": "maintenance"}
    for status in (S.SUCCESS, S.SUCCESS, S.FAILURE, S.STARTED):
        create_run_for_test(instance, job_name="example_executor", status=status, tags=kind)
    create_run_for_test(instance, job_name="example_executor", status=S.CANCELED,
                        tags={**kind, "maintenance/status": "timeout"})
    create_run_for_test(instance, job_name="morning_scrape", status=S.FAILURE, tags={"orchestration/kind": "racing"})
    with api.client() as client:
        client.put("/tasks/sync_ollama_docs_monthly", json={"enabled": False})
        stats = client.get("/stats").json()
    # Seeded enabled: the config backup, the Postgres backup and the two doc syncs; one sync was just disabled.
    assert stats["tasks_enabled"] == 3 and stats["tasks_currently_running"] == 1
    assert stats["concurrent_limit"] == 5 and stats["scheduler_running"] is False
    assert stats["execution_stats_24h"] == {"pending": 0, "running": 1, "success": 2, "failed": 1, "canceled": 0,
                                            "timeout": 1}


def test_schedulers_lists_both_locations_with_state_and_last_run(api: RunningApi) -> None:
    instance = api.instance
    run_id = create_run_for_test(instance, job_name="cleanup_job_runs", status=S.SUCCESS,
                                 tags={"dagster/schedule_name": "cleanup_job_runs_schedule",
                                       "racing/outcome": "partial"}).run_id
    listed = api.client().get("/schedulers").json()
    by_name = {item["name"]: item for item in listed}
    assert {item["location"] for item in listed} == {"racing_orchestration", "maintenance_jobs"}
    dispatcher = by_name["maintenance_dispatcher"]
    assert dispatcher["type"] == "sensor" and dispatcher["state"] == "running"
    assert dispatcher["minimum_interval_seconds"] == 60
    cleanup = by_name["cleanup_job_runs_schedule"]
    assert cleanup["type"] == "schedule" and cleanup["cron_schedule"]
    assert cleanup["last_run_id"] == run_id and cleanup["last_run_outcome"] == "partial"
    if cleanup["state"] == "running":
        assert dt.datetime.fromisoformat(cleanup["next_tick_at"]) > dt.datetime.now(dt.UTC)
    assert all(item["state"] in ("running", "stopped") for item in listed)


class BlackHole:
    """A TCP port that accepts connections and never answers (a Postgres host that hangs mid-handshake)."""

    def __init__(self) -> None:
        import socket
        import threading

        self.server = socket.create_server(("127.0.0.1", 0))
        self.port = self.server.getsockname()[1]
        self.held: list = []
        self._thread = threading.Thread(target=self._accept, daemon=True)
        self._thread.start()

    def _accept(self) -> None:
        while True:
            try:
                conn, _ = self.server.accept()
            except OSError:
                return
            self.held.append(conn)

    def close(self) -> None:
        self.server.close()
        for conn in self.held:  # the hung clients get EOF and their probe threads end
            conn.close()


# Well above what scheduling on a loaded host adds to the 0.8 s probe deadline (3.1 s at load 15), well below
# the client's timeout: a request held by a dead store (a black hole holds a connect for as long as the client waits)
# would take all of HEALTH_CLIENT_TIMEOUT_SECONDS.
HEALTH_HARD_BOUND_SECONDS = 6.0
HEALTH_CLIENT_TIMEOUT_SECONDS = 30.0


@pytest.mark.parametrize("database", ["black_hole", "closed_port"])
@pytest.mark.parametrize("store", ["registry", "both"])
def test_health_answers_503_within_a_second_whatever_the_database_does(
        database, store, registry_url: str, dagster_database_url: str) -> None:
    from contextlib import ExitStack

    with ExitStack() as stack:
        if database == "black_hole":
            hole = BlackHole()
            stack.callback(hole.close)
            port = hole.port
        else:
            port = free_port()  # nothing listens: connection refused
        bad_url = f"postgresql://postgres@127.0.0.1:{port}/nowhere"
        dagster_url = bad_url if store == "both" else dagster_database_url
        settings = ApiSettings(registry_url=bad_url, api_key=API_KEY, dagster_database_url=dagster_url,
                               dagster_ui_url="http://dagster.test", cache_seconds=0)
        server, thread = serve(create_app(settings), free_port())
        stack.callback(thread.join, 10)
        stack.callback(setattr, server, "should_exit", True)
        base = f"http://127.0.0.1:{server.servers[0].sockets[0].getsockname()[1]}"
        import httpx

        with httpx.Client(base_url=base, timeout=HEALTH_CLIENT_TIMEOUT_SECONDS) as client:
            took, overhead = [], []
            client.get("/openapi.json")  # built once, then served from memory: the control request below
            for _ in range(3):  # the later requests while the first one's probes may still hang
                overhead.append(request_overhead(client))
                started = time.monotonic()
                response = client.get("/health")
                took.append(time.monotonic() - started)
                # Never held by the dead store (a black hole holds a connect for as long as the client waits)...
                assert took[-1] < HEALTH_HARD_BOUND_SECONDS, f"/health took {took[-1]:.2f} s"
                assert response.status_code == 503
                body = response.json()
                assert body["status"] == "unavailable"
                assert body["registry_database"].startswith(("unreachable", "timed out"))
                if store == "both":
                    assert body["dagster_storage"].startswith(("unreachable", "timed out"))
                # A black hole holds the first request's fresh probe past the deadline (its connect timeout is 3 s);
                # a later request may find that probe ended by the connect timeout meanwhile: unreachable, in time.
                if database == "black_hole" and len(took) == 1:
                    assert "timed out" in body["registry_database"]
            # ... and within a second: the fastest of the three, since a worker beside this one on a 2-core host can
            # take the CPU for a few hundred ms of any single request, plus what this host took to serve a request
            # that waits for nothing (at load 34 every /health took over 1 s).
            assert min(took) < 1.0 + min(overhead), f"/health took {[round(t, 2) for t in took]} s; " \
                f"a request that waits for nothing {[round(t, 2) for t in overhead]} s"
            # The container healthcheck: the API answered, so it is serving (the database's own check fails).
            serving, said = container_probe.probe(f"{base}/health")
            assert serving and said.startswith("HTTP 503 ") and '"status": "unavailable"' in said, said


def request_overhead(client) -> float:
    """Seconds this host takes to serve the API's cached OpenAPI document: the request, routing and middleware with
    nothing to wait for, the part of a /health time a starved host adds whatever /health does."""
    started = time.monotonic()
    assert client.get("/openapi.json").status_code == 200
    return time.monotonic() - started


def test_health_answers_200_quickly_with_both_databases_up(api: RunningApi) -> None:
    took, overhead = [], []
    with api.client(key=None) as client:
        client.get("/openapi.json")
        for _ in range(3):
            overhead.append(request_overhead(client))
            started = time.monotonic()
            response = client.get("/health")
            took.append(time.monotonic() - started)
            assert response.status_code == 200 and took[-1] < HEALTH_HARD_BOUND_SECONDS
    assert min(took) < 1.0 + min(overhead), f"/health took {[round(t, 2) for t in took]} s"  # the fastest: see above
    body = response.json()
    assert (body["registry_database"], body["dagster_storage"]) == ("ok", "ok")
    # No daemon heartbeats in this test: exactly degraded (both databases answer, so not unavailable), and why.
    assert (body["status"], body["scheduler_running"]) == ("degraded", False), body
    assert body["daemon_problems"], body
    serving, said = container_probe.probe(f"{api.base_url}/health")
    assert serving and said.startswith("HTTP 200 "), said


def test_racing_day_completeness_figures_of_the_latest_checks(api: RunningApi, postgres_server_url: str,
                                                              monkeypatch) -> None:
    """The racing_day checks' stored evaluations, as /metrics exports them: the latest day, counts by class."""
    import uuid

    from local_stack.embedded_postgres import drop_database, ensure_database
    from racing_orchestration.checkpoints import sensors
    from racing_orchestration.checkpoints.racing_day import racing_day
    from racing_orchestration.race_db.resource import RaceDatabase
    from tests.racing_orchestration.race_db.test_completeness import DAY, _at, _seed

    name = f"racing_{uuid.uuid4().hex[:12]}"
    race_db = RaceDatabase(url=ensure_database(postgres_server_url, name))
    try:
        upgrade_race_db(race_db.url)
        with race_db.begin() as conn:
            _seed(conn)  # DAY: r1 complete; r2 has T-60, T-15 failed with a reason, results still waiting for Final
        monkeypatch.setattr(sensors, "sensor_now", lambda: _at(180))
        for day in (DAY - dt.timedelta(days=1), DAY):  # the later evaluation is the one exported
            dg.materialize([racing_day], partition_key=day.isoformat(), instance=api.instance,
                           resources={"race_db": race_db})
    finally:
        race_db.dispose()
        drop_database(postgres_server_url, name)
    found = samples(api.client(None).get("/metrics").text)
    pre, res, day = "pre_race_snapshots_complete", "results_complete", DAY.isoformat()
    assert value(found, "racing_day_completeness_ratio", check=pre, day=day) == 1.0
    assert value(found, "racing_day_completeness_ratio", check=res, day=day) == 0.5
    items = "racing_day_checkpoint_items"
    assert [value(found, items, check=pre, day=day, **{"class": c}) for c in ("captured", "explained", "pending",
                                                                               "missing")] == [3, 1, 0, 0]
    assert value(found, items, check=res, day=day, **{"class": "pending"}) == 1
    assert value(found, "racing_day_check_passed", check=pre, day=day) == 1
    assert value(found, "racing_day_check_passed", check=res, day=day) == 0
    evaluated = value(found, "racing_day_check_timestamp_seconds", check=res, day=day)
    assert time.time() - 600 < evaluated <= time.time()
    assert value(found, "racing_day_check_passed", check=res, day=(DAY - dt.timedelta(days=1)).isoformat()) is None
    assert value(found, "maintenance_api_metrics_errors", source="racing_day") == 0


@pytest.mark.unit
@pytest.mark.parametrize(
    ("stored", "default_running", "running"),
    [
        (None, True, True),  # never toggled: its default in code
        (None, False, False),
        ("RUNNING", False, True),
        ("STOPPED", True, False),
        ("DECLARED_IN_CODE", True, True),
    ],
)
def test_instigator_health_rows_state_and_last_tick(stored, default_running, running) -> None:
    from types import SimpleNamespace

    from platform_monitoring.catalog import Definition
    from platform_monitoring.schedulers import instigator_health_rows, selector_id
    from dagster._core.scheduler.instigation import InstigatorStatus

    item = Definition("maintenance_jobs", "__repository__", "sensor", "probe_sensor", default_running)
    states = {selector_id(item): SimpleNamespace(status=InstigatorStatus[stored])} if stored else {}
    [row] = instigator_health_rows((item,), states, {selector_id(item): (1_700_000_000.0, "skipped")})
    assert (row.name, row.type, row.location, row.running) == ("probe_sensor", "sensor", "maintenance_jobs", running)
    assert row.last_tick_at == dt.datetime.fromtimestamp(1_700_000_000, dt.UTC) and row.last_tick_status == "skipped"
    [never] = instigator_health_rows((item,), states, {})
    assert never.last_tick_at is None and never.last_tick_status is None


def test_health_lists_each_schedule_and_sensor_with_its_state_and_last_tick(api: RunningApi, monkeypatch) -> None:
    """A real sensor started and ticked by Dagster's own sensor loop on the Postgres instance, another stopped."""
    import logging

    from dagster._daemon.sensor import execute_sensor_iteration

    from tests.code_server import module_workspace

    instance = api.instance
    monkeypatch.setenv("MAINTENANCE_DATABASE_URL", api.registry_url)  # the code server the sensor ticks in reads it
    before = time.time()
    with module_workspace(instance, "maintenance_jobs.definitions", "maintenance_jobs") as context:
        repository = context.create_request_context().get_code_location("maintenance_jobs").get_repository(
            "__repository__")
        instance.start_sensor(repository.get_sensor("record_maintenance_success"))
        dispatcher = repository.get_sensor("maintenance_dispatcher")
        instance.stop_sensor(dispatcher.get_remote_origin_id(), dispatcher.selector_id, dispatcher)
        list(execute_sensor_iteration(context, logging.getLogger("sensor-test"), threadpool_executor=None,
                                      submit_threadpool_executor=None))
    body = answered_health(api)  # no key
    assert body["schedules_and_sensors_state"] == "ok"
    rows = {row["name"]: row for row in body["schedules_and_sensors"]}
    ticked = rows["record_maintenance_success"]
    assert ticked["type"] == "sensor" and ticked["location"] == "maintenance_jobs" and ticked["running"] is True
    assert dt.datetime.fromisoformat(ticked["last_tick_at"]).timestamp() >= before - 1
    assert ticked["last_tick_status"] in ("success", "skipped")
    assert rows["maintenance_dispatcher"]["running"] is False and rows["maintenance_dispatcher"]["last_tick_at"] is None
    schedule = rows["morning_scrape_schedule"]
    assert (schedule["type"], schedule["location"], schedule["last_tick_at"]) == ("schedule", "racing_orchestration",
                                                                                   None)
    assert set(rows) >= {"pre_race_t60_sensor", "racing_day_completeness_sensor", "cleanup_job_runs_schedule"}
    # Nothing but names, states and tick times: no task data, no run ids, no tick errors.
    assert set(ticked) == {"name", "type", "location", "running", "last_tick_at", "last_tick_status"}


def test_a_hanging_schedule_storage_probe_is_cut_by_the_same_deadline(registry_url: str,
                                                                      pg_instance: dg.DagsterInstance) -> None:
    """The schedules-and-sensors probe shares /health's deadline: while it hangs the answer still comes, with the
    databases `ok` and the probe reported timed out; once it answers, the next request shows the rows."""
    import threading

    from platform_monitoring import status
    from platform_monitoring.catalog import Catalog
    from platform_monitoring.schedulers import InstigatorHealth

    release = threading.Event()
    row = InstigatorHealth(name="s", type="sensor", location="l", running=True, last_tick_at=None,
                           last_tick_status=None)

    def hanging(_instance, _items):
        assert release.wait(60)
        return [row]

    engine = sa.create_engine(registry_url)
    probes = status.HealthProbes()
    try:
        # A deadline the two databases meet even on a starved host (0.3 s missed at load 34), which the hanging probe
        # cannot: cut at it, and reported with it.
        started = time.monotonic()
        first = status.health(pg_instance, engine, 60, probes=probes, instigators=hanging, deadline_seconds=5,
                              catalog=lambda: Catalog((), ()))
        assert 5 <= time.monotonic() - started < 30
        assert (first.registry_database, first.dagster_storage) == ("ok", "ok")
        assert first.schedules_and_sensors_state == "timed out after 5.0 s" and first.schedules_and_sensors == []
        release.set()
        probes.start("instigators", lambda: None).result(timeout=60)  # the same probe in flight, now answered
        second = status.health(pg_instance, engine, 60, probes=probes, instigators=hanging,
                               catalog=lambda: Catalog((), ()))
        assert second.schedules_and_sensors_state == "ok" and second.schedules_and_sensors == [row]
    finally:
        release.set()
        engine.dispose()
