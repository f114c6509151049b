"""DockerEngine.stop(): ends the dockerd the live tests started, as soon as it has exited; leaves any other alone."""

import subprocess
import sys
import time

import pytest

from tests.production.docker_engine import DockerEngine

pytestmark = pytest.mark.unit  # a stand-in process, no Docker engine


def sleeper() -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)"])


def test_stop_returns_once_the_engine_it_started_has_exited() -> None:
    process = sleeper()
    engine = DockerEngine(started_here=True, pid=process.pid, process=process)
    started = time.monotonic()
    engine.stop()
    assert process.poll() is not None
    assert time.monotonic() - started < 10, "waited for an engine that had already exited"


def test_stop_leaves_an_engine_it_did_not_start_running() -> None:
    process = sleeper()
    try:
        DockerEngine(started_here=False, pid=process.pid).stop()
        assert process.poll() is None
    finally:
        process.kill()
        process.wait()
