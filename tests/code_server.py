"""A real Dagster code server for tests: the production command (docker-compose.yml) on a free port of this host."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from concurrent import futures
from contextlib import contextmanager, suppress

import dagster as dg
import grpc
from grpc_health.v1 import health, health_pb2_grpc

from local_stack.stack import free_port
from orchestration_core.code_server_probe import code_server_status
from orchestration_core.settings import CODE_SERVER_HEARTBEAT_TTL_SECONDS
from tests.conftest import REPO_ROOT


@contextmanager
def running_code_server(module: str = "maintenance_jobs.definitions", location: str = "maintenance_jobs",
                        env: dict[str, str] | None = None,
                        heartbeat_ttl: int = CODE_SERVER_HEARTBEAT_TTL_SECONDS) -> Iterator[tuple[subprocess.Popen, int]]:
    """(process, port) of `dagster code-server start` serving `module`, once its gRPC health check answers SERVING;
    killed on exit with its process group. `env`: variables added to this process's environment for it;
    `heartbeat_ttl`: its `--heartbeat-ttl`. The process is a proxy, and its `dagster api grpc` child serves: killing
    only the proxy (as on exit, or a test's crash of it) left that child waiting out its TTL (10 minutes by
    default), so the proxy leads a process group of its own, and the whole group is killed on exit."""
    port = free_port()
    process = subprocess.Popen(
        [sys.executable, "-m", "dagster", "code-server", "start", "-h", "127.0.0.1", "-p", str(port),
         "--heartbeat-ttl", str(heartbeat_ttl), "-m", module, "--location-name", location],
        cwd=REPO_ROOT, env={**os.environ, **(env or {})}, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        start_new_session=True)
    try:
        deadline = time.monotonic() + 90
        while (status := code_server_status("127.0.0.1", port, 2)) != "SERVING":
            assert process.poll() is None and time.monotonic() < deadline, f"the code server did not start: {status}"
            time.sleep(0.5)
        yield process, port
    finally:
        with suppress(ProcessLookupError):  # the whole group already ended
            os.killpg(process.pid, signal.SIGKILL)
        process.wait(timeout=30)


def served_by(proxy: subprocess.Popen) -> list[int]:
    """The pids of the `dagster api grpc` servers the `dagster code-server start` proxy `proxy` started (its children,
    listed by `ps`, not by process group: tests check what the group kill must reach)."""
    children = subprocess.run(["ps", "--ppid", str(proxy.pid), "-o", "pid=,args="], capture_output=True, text=True,
                              check=True).stdout.splitlines()
    return [int(line.split()[0]) for line in children if "api grpc" in line]


# A starved host (load 30) can take longer than the 30 s Dagster gives a code server to exit.
CODE_SERVER_EXIT_SECONDS = 300


@contextmanager
def module_workspace(instance: dg.DagsterInstance, module: str, location: str) -> Iterator:
    """A WorkspaceProcessContext serving `module` from a code server subprocess, the way the daemon loads it. On exit
    the server is told to shut down as Dagster does, then given CODE_SERVER_EXIT_SECONDS to exit: instance_for_test
    waits only 30 s, then fails the test whose assertions had passed."""
    from dagster._core.workspace.context import WorkspaceProcessContext
    from dagster._core.workspace.load_target import ModuleTarget

    target = ModuleTarget(module_name=module, attribute=None, working_directory=str(REPO_ROOT), location_name=location)
    with WorkspaceProcessContext(instance, target) as context:
        try:
            yield context
        finally:
            registry = context._grpc_server_registry  # noqa: SLF001 - the processes Dagster would wait for
            registry.shutdown_all_processes()
            for process in registry._all_processes:  # noqa: SLF001
                process.wait(timeout=CODE_SERVER_EXIT_SECONDS)


@contextmanager
def health_service_only() -> Iterator[tuple[health.HealthServicer, int]]:
    """A gRPC server with only the standard health service, on a free port: (servicer, port); a test sets the status
    it answers."""
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=2))
    servicer = health.HealthServicer()
    health_pb2_grpc.add_HealthServicer_to_server(servicer, server)
    port = free_port()
    server.add_insecure_port(f"127.0.0.1:{port}")
    server.start()
    try:
        yield servicer, port
    finally:
        server.stop(grace=None)
