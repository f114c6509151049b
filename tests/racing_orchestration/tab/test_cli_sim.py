"""`racing sim`: argument handling, and the real command, in a child process, serving until SIGTERM."""

from __future__ import annotations

import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import ClassVar

import httpx
import pytest

from local_stack.stack import free_port, wait_for_http
from racing_orchestration.cli import build_parser
from racing_orchestration.cli import sim as cli_sim
from racing_orchestration.cli.sim import config_from_args, run_sim
from racing_orchestration.tab.sim_feed import SimFeedServer


@pytest.mark.unit
def test_arguments_become_the_feed_config() -> None:
    args = build_parser().parse_args([
        "sim", "--seed", "9", "--speed", "60", "--clock-offset", "-3600", "--dense-every", "0.5", "--latency-ms", "100",
        "--fault-5xx", "0.1", "--fault-timeout", "0.02", "--fault-malformed", "0.03", "--fault-429", "0.05",
        "--interim-after", "60", "--final-after", "300", "--events-latency-ms", "7000",
    ])
    config = config_from_args(args)
    assert (config.seed, config.speed, config.clock_offset_seconds, config.dense_every_minutes) == (9, 60, -3600, 0.5)
    assert (config.error_5xx_rate, config.timeout_rate, config.malformed_rate, config.rate_limit_rate) == (
        0.1, 0.02, 0.03, 0.05)
    assert (config.latency_ms, config.interim_after_seconds, config.final_after_seconds) == (100, 60, 300)
    assert config.events_latency_ms == 7000
    assert args.port == 8765 and args.host == "127.0.0.1"


@pytest.mark.unit
def test_fault_rates_are_checked() -> None:
    args = build_parser().parse_args(["sim", "--fault-5xx", "0.8", "--fault-429", "0.5"])
    with pytest.raises(SystemExit, match="fault rates must each be in"):
        config_from_args(args)


REPO = Path(__file__).resolve().parents[3]


@pytest.mark.api
def test_racing_sim_serves_until_sigterm() -> None:
    # The signal goes to a child process running the real command, never to pytest's own process: there a missing or
    # early-restored handler would end the whole test session instead of failing this test.
    port = free_port()
    root = f"http://127.0.0.1:{port}"
    sim = subprocess.Popen([sys.executable, "-m", "racing_orchestration.cli", "sim", "--port", str(port), "--seed", "4"],
                           cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        wait_for_http(f"{root}/_sim/stats", 60, sim)
        meetings = httpx.get(f"{root}/affiliates/v1/racing/meetings?category=T&country=NZ", timeout=30).json()
        stats = httpx.get(f"{root}/_sim/stats", timeout=30).json()
        sim.send_signal(signal.SIGTERM)  # what a supervisor does
        out, err = sim.communicate(timeout=60)
    finally:
        if sim.poll() is None:
            sim.kill()
            sim.wait()
    assert sim.returncode == 0, err
    assert f"simulated TAB feed at {root}/affiliates/v1/racing" in out
    assert out.rstrip().endswith("simulated TAB feed stopped")
    assert meetings["header"]["title"] == "Race Meetings" and meetings["data"]["meetings"]
    assert stats["requests"] == {"/meetings": 1} and stats["config"]["seed"] == 4
    with pytest.raises(httpx.TransportError):
        httpx.get(f"{root}/_sim/stats", timeout=1)


class _StopRecordingServer(SimFeedServer):
    """The real server, remembering the stop event run_sim serves until (so a test can always end the run)."""

    stops: ClassVar[list[threading.Event]] = []

    def serve_until(self, stop: threading.Event) -> None:
        self.stops.append(stop)
        super().serve_until(stop)


@pytest.mark.api
def test_racing_sim_stops_through_its_handler_and_restores_the_previous_ones(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    # In-process and without sending a signal: the handler run_sim installed is called directly, as the signal would
    # call it. Without such a handler the run is stopped through its event, so a regression fails instead of hanging.
    monkeypatch.setattr(cli_sim, "SimFeedServer", _StopRecordingServer)
    monkeypatch.setattr(_StopRecordingServer, "stops", [])
    args = build_parser().parse_args(["sim", "--port", str(free_port())])
    before = {signum: signal.getsignal(signum) for signum in (signal.SIGINT, signal.SIGTERM)}
    installed: list[object] = []

    def stop_once_serving() -> None:
        while not _StopRecordingServer.stops:
            time.sleep(0.02)
        handler = signal.getsignal(signal.SIGTERM)
        installed.append(handler)
        if handler is before[signal.SIGTERM] or not callable(handler):
            _StopRecordingServer.stops[0].set()
        else:
            handler(signal.SIGTERM, None)

    stopper = threading.Thread(target=stop_once_serving, daemon=True)
    stopper.start()
    assert run_sim(args) == 0
    stopper.join(timeout=10)
    assert installed and installed[0] is not before[signal.SIGTERM]
    assert {signum: signal.getsignal(signum) for signum in before} == before
    assert capsys.readouterr().out.rstrip().endswith("simulated TAB feed stopped")
