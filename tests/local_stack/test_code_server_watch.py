"""The local stack's code server watch (local_stack/code_server_watch.py): once Postgres answers again after an
outage, the code servers of `dagster dev`'s process group end (for `dagster dev` to start them again), and nothing
else does. Real Postgres stopped and started on its socket, real `dagster code-server start` processes."""

from __future__ import annotations

import subprocess
import sys
import time

import pytest

from local_stack.code_server_watch import CodeServerWatch, code_server_pids, restart_due
from local_stack.embedded_postgres import temporary_embedded_postgres
from local_stack.stack import free_port
from tests.code_server import running_code_server
from tests.conftest import REPO_ROOT
from tests.e2e.live_stack import wait_for
from tests.production.docker_engine import process_alive
from tests.restartable_postgres import RestartablePostgres


@pytest.mark.unit
@pytest.mark.parametrize(
    ("was_up", "is_up", "due"),
    [
        (None, True, False),  # the first check: the code servers have just started
        (None, False, False),
        (True, True, False),
        (True, False, False),  # Postgres went away: a restart now would load against a stopped database
        (False, False, False),
        (False, True, True),
    ],
)
def test_the_code_servers_restart_when_postgres_answers_again(was_up, is_up, due) -> None:
    assert restart_due(was_up, is_up) is due


@pytest.mark.integration
def test_after_an_outage_the_watched_groups_code_servers_end_and_no_other_process() -> None:
    port = free_port()
    watched = subprocess.Popen(
        [sys.executable, "-m", "dagster", "code-server", "start", "-h", "127.0.0.1", "-p", str(port),
         "-m", "maintenance_jobs.definitions", "--location-name", "maintenance_jobs"],
        cwd=REPO_ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    reports: list[str] = []
    try:
        def proxy_and_server() -> list[int] | None:
            pids = code_server_pids(watched.pid)
            return pids if len(pids) == 2 else None

        servers = wait_for("the watched proxy to start its server", proxy_and_server, 90, 0.5)
        assert watched.pid in servers
        with temporary_embedded_postgres("racing-test-pg-") as database_server, \
                running_code_server() as (elsewhere, _):
            postgres = RestartablePostgres(database_server)
            watch = CodeServerWatch(postgres.url, watched.pid, reports.append, poll_seconds=0.3)
            watch.start()
            try:
                time.sleep(1.5)
                assert watch.restarts == 0 and all(process_alive(pid) for pid in servers)
                postgres.stop()
                time.sleep(1.5)
                assert watch.restarts == 0 and all(process_alive(pid) for pid in servers)
                postgres.start()
                wait_for("the watch to restart the code servers", lambda: watch.restarts, 30, 0.2)
            finally:
                watch.stop()
            wait_for("the watched code servers to end", lambda: not any(process_alive(p) for p in servers), 10, 0.2)
            assert elsewhere.poll() is None, "a code server outside the watched process group was ended"
        assert watch.restarts == 1 and len(reports) == 1
        assert str(servers) in reports[0]
    finally:
        watched.kill()
        watched.wait(timeout=30)
