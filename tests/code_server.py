"""A real Dagster code server for tests: the production command (docker-compose.yml) on a free port of this host."""

from __future__ import annotations

import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager

from local_stack.stack import free_port
from orchestration_core.dagster_internals import ping_code_server
from tests.conftest import REPO_ROOT


@contextmanager
def running_code_server(module: str = "maintenance_jobs.definitions",
                        location: str = "maintenance_jobs") -> Iterator[tuple[subprocess.Popen, int]]:
    """(process, port) of `dagster code-server start` serving `module`, once it answers a Ping; killed on exit."""
    port = free_port()
    process = subprocess.Popen(
        [sys.executable, "-m", "dagster", "code-server", "start", "-h", "127.0.0.1", "-p", str(port),
         "-m", module, "--location-name", location],
        cwd=REPO_ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 90
        while True:
            try:
                ping_code_server("127.0.0.1", port, 2)
                break
            except Exception:
                assert process.poll() is None and time.monotonic() < deadline, "the code server did not start"
                time.sleep(0.5)
        yield process, port
    finally:
        process.kill()
        process.wait(timeout=30)
