"""`maintenance-api --workers N`: several uvicorn processes, each building the app from the environment."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import dagster as dg
import httpx
import pytest

from local_stack.stack import free_port, wait_for_http
from tests.control_api.conftest import API_KEY

pytestmark = [pytest.mark.api, pytest.mark.integration]
REPO = Path(__file__).resolve().parents[2]


def _children(pid: int) -> list[int]:
    found = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                fields = Path(f"/proc/{entry}/stat").read_text().rsplit(")", 1)[1].split()
            except OSError:
                continue
            if int(fields[1]) == pid:
                found.append(int(entry))
    return found


def _served(exposition: str, route: str) -> float:
    from prometheus_client.parser import text_string_to_metric_families

    return sum(sample.value for family in text_string_to_metric_families(exposition)
               if family.name == "maintenance_api_requests" for sample in family.samples
               if sample.name.endswith("_total") and sample.labels.get("route") == route)


@pytest.mark.parametrize("insecure", [False, True], ids=["api-key-file", "insecure-dev"])
def test_two_workers_serve_with_the_command_line_settings(registry_url: str, pg_instance: dg.DagsterInstance,
                                                          dagster_database_url: str, tmp_path: Path,
                                                          insecure: bool) -> None:
    home = tmp_path / "home"
    home.mkdir()
    (home / "dagster.yaml").write_text(f"storage:\n  postgres:\n    postgres_url: {dagster_database_url}\n"
                                       "telemetry:\n  enabled: false\n")
    key_file = tmp_path / "key"
    key_file.write_text(API_KEY + "\n")
    key_file.chmod(0o600)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("SCHEDULER_API_KEY", "_MAINTENANCE_API"))}
    env.update(DAGSTER_HOME=str(home), DAGSTER_POSTGRES_URL=dagster_database_url, MAINTENANCE_DATABASE_URL=registry_url)
    port = free_port()
    auth = ["--insecure-dev"] if insecure else ["--api-key-file", str(key_file)]
    api = subprocess.Popen([sys.executable, "-m", "control_api", "--port", str(port), "--workers", "2",
                            "--log-level", "warning", *auth], env=env, cwd=REPO)
    try:
        # Two workers each importing the app: over 60 s once on a host at load ~30 (ends early if the API exits).
        wait_for_http(f"http://127.0.0.1:{port}/health", 180, api)
        # uvicorn's supervisor spawned one process per worker
        workers = [c for c in _children(api.pid) if b"spawn_main" in Path(f"/proc/{c}/cmdline").read_bytes()]
        assert len(workers) == 2
        anonymous = httpx.get(f"http://127.0.0.1:{port}/tasks", timeout=30)
        keyed = httpx.get(f"http://127.0.0.1:{port}/tasks", timeout=30,
                          headers={"Authorization": f"Bearer {API_KEY}"})
        assert keyed.status_code == 200
        assert anonymous.status_code == (200 if insecure else 401)
        pages = {httpx.get(f"http://127.0.0.1:{port}/executions", timeout=30,
                           headers={"Authorization": f"Bearer {API_KEY}"}).status_code for _ in range(12)}
        assert pages == {200}
        # Whichever worker serves /metrics, it reports the requests of both workers.
        counts = {_served(httpx.get(f"http://127.0.0.1:{port}/metrics", timeout=30).text, "/executions")
                  for _ in range(6)}
        assert counts == {12.0}
    finally:
        api.terminate()
        api.wait(timeout=30)
