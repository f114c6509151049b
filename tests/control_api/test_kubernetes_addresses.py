"""/health and /metrics with the Kubernetes form's code-server addresses: the Service DNS names its API Deployment
sets (deploy/kubernetes, rendered). Outside a cluster those names do not resolve, the case of a Service without
endpoints: each location must show unreachable on its own, with its own label, and no page may fail."""

from __future__ import annotations

import httpx
import pytest

from control_api.app import create_app
from local_stack.stack import free_port
from tests.control_api.conftest import _dispose_storage_pools, answered, serve
from tests.control_api.test_alert_metrics import beat_every_daemon
from tests.control_api.test_metrics_and_status import samples, value
from tests.deploy.kubernetes.manifests import api_code_servers, render

pytestmark = [pytest.mark.api, pytest.mark.integration]


def test_health_and_metrics_with_service_dns_addresses(api_settings, pg_instance) -> None:
    servers = api_code_servers(render())
    assert {s.host for s in servers} == {"code-racing", "code-maintenance"}
    settings = api_settings.model_copy(update={"code_servers": servers})
    beat_every_daemon(pg_instance)
    server, thread = serve(create_app(settings), free_port())
    base = f"http://127.0.0.1:{server.servers[0].sockets[0].getsockname()[1]}"
    try:
        health = answered(lambda: httpx.get(f"{base}/health", timeout=60).json())
        assert set(health["code_servers"]) == {"racing_orchestration", "maintenance_jobs"}
        assert all(state.startswith("unreachable (") for state in health["code_servers"].values()), health
        assert health["status"] == "degraded"
        response = httpx.get(f"{base}/metrics", timeout=60)
        assert response.status_code == 200
        found = samples(response.text)
        for location in ("racing_orchestration", "maintenance_jobs"):
            assert value(found, "orchestration_code_server_up", location=location) == 0
    finally:
        server.should_exit = True
        thread.join(timeout=10)
        _dispose_storage_pools(pg_instance)
