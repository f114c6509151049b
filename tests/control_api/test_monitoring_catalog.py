"""The monitoring's catalog of schedules, sensors and jobs comes from the webserver's GraphQL (platform_monitoring/
catalog.py): it matches what the code declares, job_policies.json matches the code's retry policies, and with the
webserver down the API answers degraded, never 500."""

from __future__ import annotations

import json
import threading

import httpx
import pytest

from local_stack.stack import free_port
from orchestration_core.dagster_webserver import DagsterWebserverClient
from platform_monitoring.catalog import WebserverCatalog
from platform_monitoring.job_policies import POLICIES_FILE
from platform_monitoring.overdue import task_job_name
from tests.control_api.conftest import API_KEY, RunningApi, answered_health, serve
from tests.control_api.job_policies import code_definitions, code_jobs, code_policies

pytestmark = pytest.mark.integration


def test_the_webserver_lists_what_the_code_declares(dagster_webserver_url: str) -> None:
    catalog = WebserverCatalog(DagsterWebserverClient(dagster_webserver_url))()
    assert catalog.problem is None
    assert catalog.instigators == code_definitions()
    assert {(j.location, j.name): dict(j.tags) for j in catalog.jobs} == {
        (j.location, j.name): dict(j.tags) for j in code_jobs()}


@pytest.mark.unit
def test_job_policies_file_matches_the_code() -> None:
    """Fails when a job's retry policy changed without `python -m tests.control_api.job_policies --write`."""
    assert json.loads(POLICIES_FILE.read_text()) == code_policies()


@pytest.mark.unit
@pytest.mark.parametrize("executor", ["example_executor", "doc_sync_executor", "config_backup_executor",
                                      "postgres_backup_executor",
                                      "disk_usage_executor", "any_plugin"])
def test_a_tasks_job_is_the_one_dispatch_runs_it_in(executor: str) -> None:
    from maintenance_jobs.dispatch import job_and_op

    assert task_job_name(executor) == job_and_op(executor)[0].name


def api_without_webserver(api_settings, pg_instance) -> tuple[RunningApi, object, threading.Thread]:
    from control_api.app import create_app

    dead = f"http://127.0.0.1:{free_port()}"  # nothing listens there
    settings = api_settings.model_copy(update={"dagster_webserver_url": dead})
    app = create_app(settings)
    server, thread = serve(app, free_port())
    port = server.servers[0].sockets[0].getsockname()[1]
    return RunningApi(f"http://127.0.0.1:{port}", app, pg_instance, settings.registry_url), server, thread


def test_with_the_webserver_down_the_api_answers_degraded_never_500(api_settings, pg_instance) -> None:
    api, server, thread = api_without_webserver(api_settings, pg_instance)
    try:
        with api.client() as client:
            schedulers = client.get("/schedulers")
            assert schedulers.status_code == 503, schedulers.text
            assert "webserver" in schedulers.json()["detail"] and "127.0.0.1" not in schedulers.text
            health = answered_health(api)
            assert health["status"] == "degraded", health
            assert health["schedules_and_sensors_state"].startswith("unavailable (") and not health[
                "schedules_and_sensors"]
            assert "127.0.0.1" not in json.dumps(health)
            metrics = client.get("/metrics")
            assert metrics.status_code == 200
            assert 'maintenance_api_metrics_errors{source="catalog"} 1.0' in metrics.text
            for source in ("runs", "registry", "task_schedules", "instigators", "job_schedules", "retry_limits"):
                assert f'maintenance_api_metrics_errors{{source="{source}"}} 0.0' in metrics.text
            # The families stay (without samples), and the daemon's liveness from its heartbeats alone.
            assert "# TYPE orchestration_instigator_running gauge" in metrics.text
            assert "orchestration_instigator_running{" not in metrics.text
            assert "\norchestration_daemon_up " in metrics.text
    finally:
        server.should_exit = True
        thread.join(timeout=10)


def test_a_webserver_that_stops_answering_leaves_the_last_catalog_marked_stale(dagster_webserver_url: str) -> None:
    """The catalog answered once, then the webserver went away: the last answer is served, with why."""
    catalog = WebserverCatalog(DagsterWebserverClient(dagster_webserver_url), refresh_seconds=0)
    first = catalog()
    catalog._client = DagsterWebserverClient(f"http://127.0.0.1:{free_port()}", timeout_seconds=2)  # noqa: SLF001
    catalog._fetched_at = float("-inf")  # noqa: SLF001 (ask again now)
    second = catalog()
    assert second.instigators == first.instigators and second.jobs == first.jobs
    assert second.problem is not None and "unreachable" in second.problem


def test_the_api_lists_schedulers_from_the_webserver(api: RunningApi) -> None:
    with api.client() as client:
        body = client.get("/schedulers").json()
    names = {(row["location"], row["type"], row["name"]) for row in body}
    assert names == {(d.location, d.kind, d.name) for d in code_definitions()}
    assert httpx.get(f"{api.base_url}/schedulers", headers={"Authorization": f"Bearer {API_KEY}"}).status_code == 200


WORKSPACE_ANSWER = {"data": {"workspaceOrError": {"__typename": "Workspace", "locationEntries": [{
    "name": "racing_orchestration",
    "locationOrLoadError": {"__typename": "RepositoryLocation", "repositories": [{
        "name": "__repository__", "schedules": [], "sensors": [],
        "jobs": [{"name": "morning_scrape", "tags": []}]}]}}]}}}


class HeldWebserver:
    """A GraphQL endpoint on a real socket answering WORKSPACE_ANSWER; after `hold()`, each request waits until
    `release()` (a webserver slow to answer, up to the client's timeout)."""

    def __init__(self) -> None:
        import http.server

        held, arrived = threading.Event(), threading.Event()
        held.set()
        self.held, self.arrived = held, arrived

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_POST(self) -> None:  # noqa: N802 - http.server's name
                self.rfile.read(int(self.headers["Content-Length"]))
                arrived.set()
                held.wait(60)
                body = json.dumps(WORKSPACE_ANSWER).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args) -> None:
                pass

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def hold(self) -> None:
        self.arrived.clear()
        self.held.clear()

    def release(self) -> None:
        self.held.set()

    def close(self) -> None:
        self.release()
        self.server.shutdown()


def test_an_old_catalog_is_served_at_once_while_one_request_refreshes_it() -> None:
    """Only the request that takes the refresh waits for the webserver; the others get the catalog they had (a slow
    webserver must not hold every /health and /metrics request up to the query's timeout)."""
    webserver = HeldWebserver()
    now = [0.0]
    catalog = WebserverCatalog(DagsterWebserverClient(webserver.url, timeout_seconds=30), refresh_seconds=60,
                               clock=lambda: now[0])
    try:
        first = catalog()
        assert [job.name for job in first.jobs] == ["morning_scrape"]
        now[0] = 61.0  # old: the next request refreshes it
        webserver.hold()
        refresher = threading.Thread(target=catalog)
        refresher.start()
        assert webserver.arrived.wait(10), "the refresh never reached the webserver"
        served: list = []
        other = threading.Thread(target=lambda: served.append(catalog()))
        other.start()
        other.join(timeout=3)
        assert served == [first], "a request waited for another's refresh"
    finally:
        webserver.close()
    refresher.join(timeout=10)
    assert not refresher.is_alive()


def test_before_any_answer_requests_wait_for_the_one_query() -> None:
    """With nothing to serve yet, a request waits for the refresh in flight instead of failing or asking again."""
    webserver = HeldWebserver()
    catalog = WebserverCatalog(DagsterWebserverClient(webserver.url, timeout_seconds=30), refresh_seconds=60)
    webserver.hold()
    answers: list = []
    try:
        threads = [threading.Thread(target=lambda: answers.append(catalog())) for _ in range(3)]
        for thread in threads:
            thread.start()
        assert webserver.arrived.wait(10)
        webserver.release()
        for thread in threads:
            thread.join(timeout=10)
    finally:
        webserver.close()
    assert len(answers) == 3 and all(answer == answers[0] for answer in answers)
