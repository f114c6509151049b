"""When a code server ends for want of heartbeats (orchestration_core/dagster_internals.py, `shut_down_once_abandoned`),
through the production command: `dagster code-server start` (a proxy) and the `dagster api grpc` server it starts and
sends a heartbeat every second, which loads the location. The proxy never replaces a server that ended, so a server
must not end while the proxy lives unless the heartbeats have stopped for long, and must end soon after the proxy."""

from __future__ import annotations

import os
import signal
import subprocess
import time
from collections.abc import Iterator
from contextlib import contextmanager

import pytest
from dagster._grpc.client import DagsterGrpcClient

from tests.code_server import running_code_server
from tests.e2e.live_stack import wait_for
from tests.production.docker_engine import process_alive

pytestmark = pytest.mark.integration

# The server's heartbeat timeout under `dagster code-server start` (Dagster's default is 30 s): short, so that ten of
# them (the patience of `shut_down_once_abandoned`) fit a test.
TTL_SECONDS = 2


def serves(port: int) -> bool:
    try:
        DagsterGrpcClient(port=port, host="127.0.0.1").list_repositories()
    except Exception:  # noqa: BLE001 - unreachable, whatever the gRPC error
        return False
    return True


@contextmanager
def proxy_and_server() -> Iterator[tuple[subprocess.Popen, int, int]]:
    """(proxy process, its port, the pid of the server it started); the server is killed on exit if still alive."""
    env = {"DAGSTER_GRPC_PROXY_HEARTBEAT_TTL_SECONDS": str(TTL_SECONDS)}
    with running_code_server(env=env) as (proxy, port):
        children = subprocess.run(["ps", "--ppid", str(proxy.pid), "-o", "pid=,args="], capture_output=True,
                                  text=True, check=True).stdout.splitlines()
        servers = [int(line.split()[0]) for line in children if "api grpc" in line]
        assert len(servers) == 1, children
        try:
            yield proxy, port, servers[0]
        finally:
            if process_alive(servers[0]):
                os.kill(servers[0], signal.SIGCONT)
                os.kill(servers[0], signal.SIGKILL)


def test_a_server_that_missed_heartbeats_for_four_timeouts_still_serves() -> None:
    """Stopped for four timeouts, as a starved server is, then let go: Dagster's own rule ended it after one, and the
    proxy answered "unreachable" from then on."""
    with proxy_and_server() as (proxy, port, server):
        os.kill(server, signal.SIGSTOP)
        time.sleep(4 * TTL_SECONDS)
        os.kill(server, signal.SIGCONT)
        time.sleep(3 * TTL_SECONDS)  # its heartbeat thread has looked at least twice since
        assert process_alive(server), "the code server ended after missed heartbeats while its proxy lived"
        assert serves(port), "the proxy's code server does not answer"


def test_a_server_ends_within_seconds_of_its_proxy() -> None:
    """Killed, the proxy sends no heartbeat and no shutdown: the server ends on seeing it gone (within a timeout or
    two), well before ten timeouts without a heartbeat would end it."""
    with proxy_and_server() as (proxy, port, server):
        proxy.kill()
        proxy.wait(timeout=30)
        wait_for("the server to end after its proxy", lambda: not process_alive(server), 3 * TTL_SECONDS + 5, 0.2)


def test_a_server_whose_live_proxy_sends_no_heartbeat_ends_after_ten_timeouts() -> None:
    """The proxy stopped (alive, silent): the server ends after ten timeouts without a heartbeat, not after one."""
    with proxy_and_server() as (proxy, port, server):
        os.kill(proxy.pid, signal.SIGSTOP)
        try:
            time.sleep(5 * TTL_SECONDS)
            assert process_alive(server), "the server ended after 5 timeouts without a heartbeat"
            wait_for("the server to end within 14 timeouts without a heartbeat", lambda: not process_alive(server),
                     9 * TTL_SECONDS, 0.2)
        finally:
            os.kill(proxy.pid, signal.SIGCONT)
