"""The control API served for real: uvicorn on a free port in a background thread, Postgres behind it, and a real
Dagster webserver (its own process, the public `dagster-webserver` command) serving both code locations: the API's
monitoring asks it which schedules, sensors and jobs exist."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import dagster as dg
import httpx
import pytest
import uvicorn
import yaml

from local_stack.stack import free_port
from control_api.app import create_app
from control_api.config import ApiSettings
from tests.conftest import REPO_ROOT, pooled_postgres_storage

API_KEY = "test-key-0123456789abcdef"


@dataclass
class RunningApi:
    base_url: str
    app: object
    instance: dg.DagsterInstance
    registry_url: str

    def client(self, key: str | None = API_KEY) -> httpx.Client:
        headers = {"Authorization": f"Bearer {key}"} if key else {}
        return httpx.Client(base_url=self.base_url, headers=headers, timeout=30)


class ThreadedServer(uvicorn.Server):
    def install_signal_handlers(self) -> None:  # the test process keeps its own handlers
        pass


def probes_overran(health: dict) -> list[str]:
    """The /health fields whose probe overran its 0.8 s deadline ("timed out after 0.8 s"): the Postgres pings, the
    schedules-and-sensors probe, each code server's ping."""
    fields = {**health, **{f"code_servers.{k}": v for k, v in (health.get("code_servers") or {}).items()}}
    return sorted(k for k, v in fields.items() if isinstance(v, str) and v.startswith("timed out after"))


def answered(get_health: Callable[[], dict], within: float = 60) -> dict:
    """/health once none of its probes overran the 0.8 s deadline (or its last answer after `within`). On a loaded
    host one can overrun it (seen at load 24-40 with the suite's stacks starting: the registry ping, the code-server
    pings, the schedules-and-sensors probe); asked again, /health runs every probe again. What the tests check is what
    a probe that answered says."""
    deadline = time.monotonic() + within
    while True:
        health = get_health()
        if not probes_overran(health) or time.monotonic() > deadline:
            return health
        time.sleep(0.5)


def answered_health(api: RunningApi, within: float = 60) -> dict:
    return answered(lambda: api.client(None).get("/health").json(), within)


def serve(app, port: int, **config: object) -> tuple[ThreadedServer, threading.Thread]:
    """`config`: more uvicorn.Config arguments (e.g. log_config, log_level; default: warnings only)."""
    config.setdefault("log_level", "warning")
    server = ThreadedServer(uvicorn.Config(app, host="127.0.0.1", port=port, **config))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 15
    while not server.started:
        if time.monotonic() > deadline or not thread.is_alive():
            raise RuntimeError("uvicorn did not start")
        time.sleep(0.02)
    return server, thread


def _dispose_storage_pools(instance: dg.DagsterInstance) -> None:
    # The API pools storage connections (optimize_for_webserver); close them with the test's instance.
    for storage in (instance.run_storage, instance.event_log_storage, instance.schedule_storage):
        engine = getattr(storage, "_engine", None)
        if engine is not None:
            engine.dispose()


WEBSERVER_START_SECONDS = 240


@contextmanager
def webserver_process(dagster_database_url: str, home: Path, workspace: Path = REPO_ROOT / "workspace.yaml"
                      ) -> Iterator[str]:
    """`dagster-webserver -w workspace.yaml` on a free port, its instance on the session's storage and queueing runs
    (nothing dequeues them here); yields its URL once its GraphQL lists every location of `workspace` loaded."""
    home.mkdir(parents=True, exist_ok=True)
    (home / "dagster.yaml").write_text(yaml.safe_dump({
        "storage": pooled_postgres_storage(dagster_database_url),
        "run_coordinator": {"module": "dagster._core.run_coordinator", "class": "QueuedRunCoordinator"},
        "telemetry": {"enabled": False},
    }))
    port = free_port()
    log = (home / "webserver.log").open("wb")
    process = subprocess.Popen(
        [str(Path(sys.executable).with_name("dagster-webserver")), "-w", str(workspace), "-h", "127.0.0.1", "-p",
         str(port)], cwd=REPO_ROOT, env={**os.environ, "DAGSTER_HOME": str(home)}, stdout=log, stderr=subprocess.STDOUT)
    url = f"http://127.0.0.1:{port}"
    try:
        wait_until_loaded(url, process, home / "webserver.log")
        yield url
    finally:
        process.terminate()
        try:
            process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
        log.close()


def wait_until_loaded(url: str, process: subprocess.Popen, log: Path) -> None:
    from platform_monitoring.catalog import WORKSPACE_QUERY, location_entries
    from orchestration_core.dagster_webserver import DagsterWebserverClient, QueryRejected, WebserverUnavailable

    client = DagsterWebserverClient(url, timeout_seconds=10)
    deadline = time.monotonic() + WEBSERVER_START_SECONDS
    while True:
        if process.poll() is not None:
            raise RuntimeError(f"dagster-webserver exited {process.returncode}: {log.read_text()[-2000:]}")
        try:
            loaded, problems = location_entries(client.query(WORKSPACE_QUERY))
            if loaded and not problems:
                return
        except (WebserverUnavailable, QueryRejected):
            pass
        if time.monotonic() > deadline:
            raise RuntimeError(f"dagster-webserver did not load its locations: {log.read_text()[-2000:]}")
        time.sleep(0.5)


@pytest.fixture(scope="session")
def dagster_webserver_url(dagster_database_url: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """For the control API's tests: a webserver serving both code locations (the session's shared fixture serves the
    maintenance location only)."""
    with webserver_process(dagster_database_url, tmp_path_factory.mktemp("webserver-home")) as url:
        yield url


@pytest.fixture
def api_settings(registry_url: str, pg_instance: dg.DagsterInstance, dagster_database_url: str,
                 dagster_webserver_url: str) -> ApiSettings:
    # No response cache: tests create runs behind the API's back and read them at once. The API reads the storage
    # `pg_instance` writes (the tests' Dagster instance) through its own engine on that database.
    return ApiSettings(registry_url=registry_url, api_key=API_KEY, dagster_database_url=dagster_database_url,
                       dagster_ui_url="http://dagster.test", dagster_webserver_url=dagster_webserver_url,
                       cache_seconds=0, metrics_cache_seconds=0)


@pytest.fixture
def api(api_settings: ApiSettings, pg_instance: dg.DagsterInstance) -> Iterator[RunningApi]:
    app = create_app(api_settings)
    server, thread = serve(app, free_port())
    port = server.servers[0].sockets[0].getsockname()[1]
    try:
        yield RunningApi(f"http://127.0.0.1:{port}", app, pg_instance, api_settings.registry_url)
    finally:
        server.should_exit = True
        thread.join(timeout=10)
        _dispose_storage_pools(pg_instance)
