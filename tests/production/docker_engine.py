"""A Docker engine for the live production test: the one already running, or one this module starts and stops.

Debian's docker.io has no init system to start it here, so `dockerd` is started by hand (overlay2, the machine's
default data root so images built by one run are reused by the next) and stopped by the pid it wrote, never by name.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

SOCKET = "/var/run/docker.sock"


class DockerUnavailable(RuntimeError):
    """No engine is running and none can be started here (no dockerd binary, not root)."""


def docker_cli() -> str:
    # Debian's package puts a 20.10 client at /usr/bin/docker; any client talks to the engine.
    found = shutil.which("docker")
    if not found:
        raise DockerUnavailable("no docker client on PATH (Debian: apt-get install docker.io)")
    return found


def engine_answers(timeout: float = 10.0) -> bool:
    try:
        done = subprocess.run(
            [docker_cli(), "info", "--format", "{{.ServerVersion}}"],
            capture_output=True,
            text=True,
            timeout=timeout,
        )
    except (DockerUnavailable, subprocess.TimeoutExpired):
        return False
    return done.returncode == 0 and bool(done.stdout.strip())


@dataclass
class DockerEngine:
    """The engine the test talks to; `started_here` says whether `stop()` ends it."""

    started_here: bool
    pid: int | None = None
    log_path: Path | None = None
    process: subprocess.Popen | None = None  # the dockerd this module started

    def stop(self) -> None:
        if not self.started_here or self.process is None:
            return
        self.process.send_signal(signal.SIGTERM)
        # wait() reaps it: a dockerd that exited stays a zombie until then, and polling its pid with kill(pid, 0)
        # found it "alive" until the deadline (60 s lost at the end of every run that started the engine).
        try:
            self.process.wait(timeout=60)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait(timeout=30)


def ensure_engine(state_dir: Path) -> DockerEngine:
    """Use the running engine, or start `dockerd` (root only) and wait until it answers."""
    if engine_answers():
        return DockerEngine(started_here=False)
    dockerd = shutil.which("dockerd") or ("/usr/sbin/dockerd" if Path("/usr/sbin/dockerd").exists() else None)
    if dockerd is None:
        raise DockerUnavailable("no Docker engine is running and dockerd is not installed (apt-get install docker.io)")
    if os.geteuid() != 0:
        raise DockerUnavailable("no Docker engine is running and starting dockerd needs root")
    state_dir.mkdir(parents=True, exist_ok=True)
    log_path = state_dir / "dockerd.log"
    pidfile = state_dir / "dockerd.pid"
    with open(log_path, "ab") as log:
        process = subprocess.Popen(
            [
                dockerd,
                "--storage-driver=overlay2",
                f"--exec-root={state_dir / 'exec'}",
                f"--pidfile={pidfile}",
                f"--host=unix://{SOCKET}",
            ],
            stdout=log,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            start_new_session=True,
        )
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise DockerUnavailable(f"dockerd exited with {process.returncode}: see {log_path}")
        if engine_answers(timeout=5):
            return DockerEngine(started_here=True, pid=process.pid, log_path=log_path, process=process)
        time.sleep(0.5)
    process.kill()
    raise DockerUnavailable(f"dockerd did not answer within 60 s: see {log_path}")


def engine_for_test(state_dir: Path) -> DockerEngine:
    """`ensure_engine` for a test fixture: skips without an engine, but fails under CI=true, where `.ci/run` installs
    Debian's docker.io (a skipped deployment test must never pass for a green CI)."""
    import pytest

    try:
        return ensure_engine(state_dir)
    except DockerUnavailable as exc:
        if os.environ.get("CI") == "true":
            pytest.fail(f"CI=true but no Docker engine: {exc} (.ci/run installs Debian's docker.io)")
        pytest.skip(f"no Docker engine: {exc}")
