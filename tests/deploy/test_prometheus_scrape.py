"""A real Prometheus (Debian's package; make test installs it) scraping the real control API with the production scrape
job and evaluating the production rules: the series keep the metrics' own labels (the Dagster `job`), carry none of
the target's (instance, job="control-api"), and the alerts come out with the labels the rules and messages expect."""

from __future__ import annotations

import shutil
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import dagster as dg
import httpx
import pytest
from dagster._daemon.types import DaemonHeartbeat

from control_api.app import create_app
from control_api.config import ApiSettings
from local_stack.stack import free_port
from maintenance_jobs.database.migrate import upgrade
from tests.control_api.conftest import _dispose_storage_pools, serve
from tests.deploy.alert_path import prometheus_config
from tests.deploy.test_metrics_contract import metrics_probe_job

pytestmark = pytest.mark.integration


def prometheus_binary() -> str:
    found = shutil.which("prometheus")
    if found is None:
        pytest.fail("prometheus not found: install Debian's prometheus package (apt-get install "
                    "--no-install-recommends prometheus); make test does this")
    return found


@pytest.fixture
def prometheus(fresh_database_url: str, pg_instance: dg.DagsterInstance, dagster_database_url: str,
               tmp_path: Path) -> Iterator[str]:
    upgrade(fresh_database_url)
    assert metrics_probe_job.execute_in_process(instance=pg_instance).success
    settings = ApiSettings(registry_url=fresh_database_url, api_key="deploy-test-key-0123",
                           dagster_database_url=dagster_database_url)
    server, thread = serve(create_app(settings), free_port())
    api_port = server.servers[0].sockets[0].getsockname()[1]
    # One daemon beats after the API started and the others never: down, and past starting (DagsterDaemonDown waits
    # while no daemon has beaten since the API started).
    pg_instance.add_daemon_heartbeat(DaemonHeartbeat(time.time(), "SENSOR", None, None))
    config = prometheus_config(tmp_path / "config", interval="1s", api_target=f"127.0.0.1:{api_port}")
    port = free_port()
    process = subprocess.Popen([prometheus_binary(), f"--config.file={config}",
                                f"--storage.tsdb.path={tmp_path / 'data'}", f"--web.listen-address=127.0.0.1:{port}"],
                               stdout=subprocess.DEVNULL, stderr=(tmp_path / "prometheus.log").open("w"))
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        process.terminate()
        process.wait(timeout=30)
        server.should_exit = True
        thread.join(timeout=10)
        _dispose_storage_pools(pg_instance)


def query(url: str, expr: str) -> list[dict]:
    response = httpx.get(f"{url}/api/v1/query", params={"query": expr}, timeout=10)
    response.raise_for_status()
    return response.json()["data"]["result"]


def wait_query(url: str, expr: str, timeout: float = 60) -> list[dict]:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            if found := query(url, expr):
                return found
        except httpx.HTTPError:
            pass
        time.sleep(0.5)
    raise AssertionError(f"no result for {expr} within {timeout} s")


def test_the_scraped_series_keep_the_dagster_job_and_drop_the_target_labels(prometheus: str) -> None:
    [runs] = wait_query(prometheus, 'orchestration_runs{window="1h"}')
    assert runs["metric"] == {"__name__": "orchestration_runs", "job": "metrics_probe_job", "outcome": "success",
                              "window": "1h"}
    [daemon] = wait_query(prometheus, "orchestration_daemon_up")
    assert daemon["metric"] == {"__name__": "orchestration_daemon_up"}
    # Only Prometheus' own per-target series (up, scrape_*) carry the target's labels.
    assert query(prometheus, '{exported_job!=""}') == []
    assert query(prometheus, '{instance!="", __name__!~"up|scrape_.*"}') == []
    # The rules see the same labels: the probe job's failure rate is computed per job, and the alerts carry only
    # their own labels (only the sensor daemon beats here: DagsterDaemonDown is pending).
    [pending] = wait_query(prometheus, 'ALERTS{alertname="DagsterDaemonDown"}')
    assert pending["metric"] == {"__name__": "ALERTS", "alertname": "DagsterDaemonDown", "alertstate": "pending",
                                 "severity": "critical", "tier": "platform"}
    last_success = wait_query(prometheus, "orchestration_last_success_timestamp_seconds")
    assert {r["metric"]["job"] for r in last_success} == {"metrics_probe_job"}
