"""/health's and /metrics' code-server check (platform_monitoring/liveness.py): the standard gRPC health check with
our own timeout, against a gRPC health service set to each status and against nothing. The real code server, killed
while the control API watches, is in tests/control_api/test_alert_metrics.py."""

from __future__ import annotations

import time

import pytest
from grpc_health.v1 import health_pb2

from local_stack.stack import free_port
from platform_monitoring.liveness import CodeServer, CodeServerNotServing, check_code_server, code_server_states
from tests.code_server import health_service_only

pytestmark = [pytest.mark.integration]


@pytest.fixture
def health_service():
    with health_service_only() as service:
        yield service


def test_a_serving_code_server_is_ok(health_service) -> None:
    servicer, port = health_service
    servicer.set("DagsterApi", health_pb2.HealthCheckResponse.SERVING)
    check_code_server(CodeServer("maintenance_jobs", "127.0.0.1", port))
    assert code_server_states((CodeServer("maintenance_jobs", "127.0.0.1", port),)) == {"maintenance_jobs": "ok"}


@pytest.mark.parametrize(("status", "answer"), [
    (health_pb2.HealthCheckResponse.NOT_SERVING, "NOT_SERVING"),
    (health_pb2.HealthCheckResponse.UNKNOWN, "UNKNOWN"),
    (health_pb2.HealthCheckResponse.SERVICE_UNKNOWN, "SERVICE_UNKNOWN"),
])
def test_any_other_answer_is_down_and_named(health_service, status, answer: str) -> None:
    servicer, port = health_service
    servicer.set("DagsterApi", status)
    server = CodeServer("maintenance_jobs", "127.0.0.1", port)
    with pytest.raises(CodeServerNotServing, match=rf"127\.0\.0\.1:{port} answered {answer}$"):
        check_code_server(server)
    assert code_server_states((server,)) == {"maintenance_jobs": "unreachable (CodeServerNotServing)"}


def test_no_answer_is_down_within_the_timeout() -> None:
    server = CodeServer("racing_orchestration", "127.0.0.1", free_port())
    started = time.monotonic()
    with pytest.raises(CodeServerNotServing, match=r"answered UNREACHABLE \(UNAVAILABLE\)"):
        check_code_server(server, timeout_seconds=1)
    assert code_server_states((server,)) == {"racing_orchestration": "unreachable (CodeServerNotServing)"}
    # Ten times the 1 s and 2 s timeouts: a starved host stretches them, a check without a deadline would not end.
    assert time.monotonic() - started < 30
