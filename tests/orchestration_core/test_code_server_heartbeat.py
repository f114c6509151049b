"""The code servers' heartbeat TTL (`CODE_SERVER_HEARTBEAT_TTL_SECONDS`, orchestration_core/settings.py): Dagster's
own `--heartbeat-ttl` of `dagster code-server start` (a proxy), which `make run`'s `dagster dev` starts for each
location, and of the `dagster api grpc` server the proxy starts and sends a heartbeat every second. The proxy never
replaces a server that ended, so a server starved for less than its TTL must still serve, and one whose proxy is gone
must still end, within its TTL. The compose and Kubernetes forms run `dagster api grpc` as the container's own
process, with no heartbeat to wait for: nothing sends one there."""

from __future__ import annotations

import os
import signal
import subprocess
import time
from collections.abc import Iterator
from contextlib import contextmanager, suppress

import pytest
import yaml
from dagster._grpc.client import DagsterGrpcClient

from local_stack.stack import DAGSTER_DEV_ENV
from orchestration_core.settings import CODE_SERVER_HEARTBEAT_TTL_SECONDS
from tests.code_server import running_code_server, served_by
from tests.conftest import REPO_ROOT
from tests.e2e.live_stack import wait_for
from tests.production.docker_engine import process_alive

CODE_SERVICES = {"code-racing", "code-maintenance"}


def serves(port: int) -> bool:
    try:
        DagsterGrpcClient(port=port, host="127.0.0.1").list_repositories()
    except Exception:  # noqa: BLE001 - unreachable, whatever the gRPC error
        return False
    return True


def container_commands() -> dict[str, list[str]]:
    """The code servers' commands in the compose file and the Kubernetes manifests, by service and Deployment."""
    compose = yaml.safe_load((REPO_ROOT / "docker-compose.yml").read_text())["services"]
    commands = {f"compose {name}": compose[name]["command"] for name in CODE_SERVICES}
    manifests = yaml.safe_load_all((REPO_ROOT / "deploy/kubernetes/base/code-servers.yaml").read_text())
    commands.update({f"kubernetes {doc['metadata']['name']}": container["command"]
                     for doc in manifests if doc and doc["kind"] == "Deployment"
                     for container in doc["spec"]["template"]["spec"]["containers"]
                     if container["name"] == "code-server"})
    return commands


@pytest.mark.unit
def test_the_container_forms_serve_without_a_heartbeat_and_make_run_gives_its_proxies_the_ttl() -> None:
    commands = container_commands()
    assert len(commands) == 4, commands
    for form, command in commands.items():
        served = command[command.index("--") + 1:]
        assert served[:3] == ["dagster", "api", "grpc"], (form, command)
        # A server with --heartbeat ends once no heartbeat came for its timeout: in a container nothing sends one.
        assert not {"--heartbeat", "--heartbeat-timeout"} & set(served), (form, command)
    assert DAGSTER_DEV_ENV["DAGSTER_GRPC_PROXY_HEARTBEAT_TTL_SECONDS"] == str(CODE_SERVER_HEARTBEAT_TTL_SECONDS)
    # Long enough to outlast a starved host (ten of Dagster's default 30 s), short enough to end a lost server's
    # leftovers within a quarter hour.
    assert 300 <= CODE_SERVER_HEARTBEAT_TTL_SECONDS <= 900


@contextmanager
def proxy_and_server(ttl: int) -> Iterator[tuple[subprocess.Popen, int, int]]:
    """(proxy process, its port, the pid of the server it started); the server is killed on exit if still alive."""
    with running_code_server(heartbeat_ttl=ttl) as (proxy, port):
        servers = served_by(proxy)
        assert len(servers) == 1, servers
        try:
            yield proxy, port, servers[0]
        finally:
            # SIGKILL ends a stopped server too; it may have ended since its last look, which is what the TTL-2 row
            # waits for.
            with suppress(ProcessLookupError):
                os.kill(servers[0], signal.SIGKILL)


STARVED_SECONDS = 6
HEARTBEAT_DRAIN_SECONDS = 3


@pytest.mark.integration
@pytest.mark.parametrize(
    ("ttl", "survives"),
    [
        (2, False),  # Dagster's rule at a TTL shorter than the starvation: the server ends and is never replaced
        (STARVED_SECONDS * 3, True),
    ],
)
def test_a_server_starved_for_less_than_its_ttl_still_serves(ttl: int, survives: bool) -> None:
    """The whole host starved: the proxy stops first and resumes last. A heartbeat the proxy sent while the server was
    stopped waited for it, and whether the resumed server handled that heartbeat or its own overdue check first
    decided the TTL-2 row under load (it once served on, its heartbeats refreshed, for the whole minute waited)."""
    with proxy_and_server(ttl) as (proxy, port, server):
        os.kill(proxy.pid, signal.SIGSTOP)
        try:
            time.sleep(HEARTBEAT_DRAIN_SECONDS)  # the running server handles a heartbeat already sent
            os.kill(server, signal.SIGSTOP)
            time.sleep(STARVED_SECONDS)
            os.kill(server, signal.SIGCONT)
            if survives:
                time.sleep(3)  # its heartbeat thread looks at least once more (every TTL, or at once when overdue)
            else:
                # An overdue server shuts down as soon as its heartbeat thread runs again: on a host at load 20-40
                # that took more than 3 s once, so wait for the end (a server that outlives its TTL still fails).
                wait_for("the starved server to end", lambda: not process_alive(server), 60, 0.2)
        finally:
            os.kill(proxy.pid, signal.SIGCONT)
        assert (process_alive(server) and serves(port)) is survives
        assert proxy.poll() is None


@pytest.mark.integration
def test_a_server_ends_within_its_ttl_of_its_proxy() -> None:
    """Killed, the proxy sends no heartbeat and no shutdown: the server ends once its TTL has passed, not later."""
    ttl = 4
    with proxy_and_server(ttl) as (proxy, port, server):
        proxy.kill()
        proxy.wait(timeout=30)
        wait_for("the server to end after its proxy", lambda: not process_alive(server), 2 * ttl + 5, 0.2)
