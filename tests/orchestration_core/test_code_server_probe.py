"""The code servers' container healthcheck: the same answer as `dagster api grpc-health-check`, from a real code
server and from a gRPC health service set to each status, without importing Dagster."""

from __future__ import annotations

import subprocess
import sys
import time

import pytest
from grpc_health.v1 import health_pb2

from local_stack.stack import free_port
from orchestration_core.code_server_probe import code_server_status, main
from tests.code_server import health_service_only, running_code_server
from tests.conftest import REPO_ROOT

pytestmark = [pytest.mark.integration]


@pytest.fixture
def health_service():
    with health_service_only() as service:
        yield service


@pytest.mark.parametrize(("status", "expected", "exit_code"), [
    (health_pb2.HealthCheckResponse.SERVING, "SERVING", 0),
    (health_pb2.HealthCheckResponse.NOT_SERVING, "NOT_SERVING", 1),
])
def test_the_dagster_service_status_decides(health_service, status, expected, exit_code) -> None:
    servicer, port = health_service
    servicer.set("DagsterApi", status)
    assert code_server_status("127.0.0.1", port) == expected
    assert main([str(port)]) == exit_code


def test_a_server_without_the_dagster_service_is_not_serving(health_service) -> None:
    servicer, port = health_service
    servicer.set("SomethingElse", health_pb2.HealthCheckResponse.SERVING)
    assert code_server_status("127.0.0.1", port) == "UNREACHABLE (NOT_FOUND)"
    assert main([str(port)]) == 1


def test_no_server_fails_within_the_timeout() -> None:
    started = time.monotonic()
    assert code_server_status("127.0.0.1", free_port(), timeout_seconds=2) == "UNREACHABLE (UNAVAILABLE)"
    # Ten times the timeout: a starved host can stretch the 2 s, a probe without its deadline would not end at all.
    assert time.monotonic() - started < 20


@pytest.mark.parametrize("argv", [[], ["not-a-port"], ["4000", "host", "extra"]])
def test_bad_arguments_exit_2(argv) -> None:
    assert main(argv) == 2


def test_a_real_code_server_is_serving_and_a_killed_one_is_not() -> None:
    """The production command of a code server, probed the way its container healthcheck runs: a new Python process
    that never imports Dagster (checked, since that import is the cost this probe exists to avoid)."""
    probe = [sys.executable, "-X", "importtime", "-m", "orchestration_core.code_server_probe"]
    with running_code_server() as (process, port):
        answered = subprocess.run([*probe, str(port)], cwd=REPO_ROOT, capture_output=True, text=True, timeout=60)
        assert answered.returncode == 0, answered.stderr[-2000:]
        imported = {line.rsplit("|", 1)[-1].strip() for line in answered.stderr.splitlines() if "|" in line}
        assert "grpc" in imported and not any(name.split(".")[0] == "dagster" for name in imported)
        process.kill()
        process.wait(timeout=30)
        gone = subprocess.run([*probe, str(port)], cwd=REPO_ROOT, capture_output=True, text=True, timeout=60)
        assert gone.returncode == 1
        assert f"code server at 127.0.0.1:{port} is not serving: UNREACHABLE" in gone.stderr
