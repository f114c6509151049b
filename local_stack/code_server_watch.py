"""The local stack's watch on its code servers: once Dagster's Postgres answers again after an outage, the code
servers `dagster dev` started are ended, and `dagster dev` starts them again within seconds (its own supervision of
the `dagster code-server start` processes it manages).

Why: under the local stack's run launcher (Dagster's default) each run's worker is a child of its location's code
server, whose cleanup thread reports workers that ended without finishing their run. A database error ends that
thread for good (Dagster has no setting for it): a worker that died during an outage is never reported, and when run
monitoring later cancels its run at its max runtime, the server's cancel waits forever on the dead worker and holds
the lock every later run's start needs, so the location starts no run again. A fresh server has a live cleanup
thread. Runs in flight keep going: their workers are processes of their own and report to storage themselves.
The production forms launch each run in a container or Kubernetes Job, so their code servers start no worker and
need no watch.
"""

from __future__ import annotations

import os
import signal
import threading
from collections.abc import Callable
from pathlib import Path

import sqlalchemy as sa

from orchestration_core.postgres import create_engine

# What Dagster's code server processes run as: the proxy `dagster dev` supervises and the server it starts.
CODE_SERVER_COMMANDS = ("dagster code-server start", "dagster api grpc")
POLL_SECONDS = 2.0


def restart_due(was_up: bool | None, is_up: bool) -> bool:
    """Whether the code servers are restarted now: Postgres answers and, the check before, did not. Not at the first
    check (None: the stack has just started its code servers)."""
    return was_up is False and is_up


def postgres_answers(engine: sa.Engine) -> bool:
    try:
        with engine.connect() as conn:
            conn.execute(sa.text("SELECT 1"))
    except sa.exc.SQLAlchemyError:
        return False
    return True


def code_server_pids(process_group: int, proc: Path = Path("/proc")) -> list[int]:
    """The code server processes (CODE_SERVER_COMMANDS) in `process_group`."""
    found = []
    for entry in proc.iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
            command = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except OSError:  # ended meanwhile
            continue
        # Field 5 of /proc/<pid>/stat is the process group; the command name before it may hold spaces.
        if int(stat.rsplit(")", 1)[1].split()[2]) == process_group and any(c in command for c in CODE_SERVER_COMMANDS):
            found.append(int(entry.name))
    return sorted(found)


def end_code_servers(process_group: int) -> list[int]:
    """SIGKILL the code servers of `process_group`; returns their pids."""
    pids = code_server_pids(process_group)
    for pid in pids:
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    return pids


class CodeServerWatch(threading.Thread):
    """Checks every `poll_seconds` that Postgres at `database_url` answers; on its return after an outage ends the
    code servers of `process_group` (`dagster dev`'s) and says so through `report`."""

    def __init__(self, database_url: str, process_group: int, report: Callable[[str], None],
                 poll_seconds: float = POLL_SECONDS) -> None:
        super().__init__(name="code-server-watch", daemon=True)
        self.database_url, self.process_group, self.report = database_url, process_group, report
        self.poll_seconds = poll_seconds
        self.stopped = threading.Event()
        self.restarts = 0

    def run(self) -> None:
        engine = create_engine(self.database_url, "watch")  # one for the watch's life, a connection per check
        was_up = None
        while not self.stopped.wait(self.poll_seconds):
            is_up = postgres_answers(engine)
            if restart_due(was_up, is_up):
                ended = end_code_servers(self.process_group)
                self.restarts += 1
                self.report(f"Postgres answers again: restarted the code servers (pids {ended}), whose check of "
                            "ended run workers does not survive a database error")
            was_up = is_up

    def stop(self) -> None:
        self.stopped.set()
