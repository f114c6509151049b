"""tests/code_server.py's `running_code_server`: what it starts is gone when the test leaves it, however the test left
the proxy. `dagster code-server start` serves through a `dagster api grpc` child with a heartbeat TTL of 10 minutes:
a child outliving its killed proxy held a Dagster import's memory and its threads for that long after the suite."""

from __future__ import annotations

import pytest

from tests.code_server import running_code_server, served_by
from tests.e2e.live_stack import wait_for
from tests.production.docker_engine import process_alive

pytestmark = pytest.mark.integration


@pytest.mark.parametrize("proxy_killed_by_the_test", [False, True])
def test_no_server_outlives_the_context(proxy_killed_by_the_test: bool) -> None:
    with running_code_server() as (proxy, _port):
        servers = served_by(proxy)
        assert servers, "the proxy started no server"
        if proxy_killed_by_the_test:
            proxy.kill()
            proxy.wait(timeout=30)
    wait_for("the proxy's servers to end", lambda: not any(map(process_alive, servers)), 10, 0.2)
