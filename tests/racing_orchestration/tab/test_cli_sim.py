"""`racing sim`: argument handling, and the real process serving until SIGTERM."""

from __future__ import annotations

import os
import signal
import socket
import threading
import time

import httpx
import pytest

from racing_orchestration.cli import build_parser
from racing_orchestration.cli.sim import config_from_args, run_sim


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


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


@pytest.mark.api
def test_racing_sim_serves_until_sigterm(capsys: pytest.CaptureFixture[str]) -> None:
    port = _free_port()
    args = build_parser().parse_args(["sim", "--port", str(port), "--seed", "4"])
    root = f"http://127.0.0.1:{port}"
    seen: dict[str, object] = {}

    def use_then_terminate() -> None:
        try:
            for _ in range(100):
                try:
                    seen["meetings"] = httpx.get(f"{root}/affiliates/v1/racing/meetings?category=T&country=NZ").json()
                    break
                except httpx.TransportError:
                    time.sleep(0.05)
            seen["stats"] = httpx.get(f"{root}/_sim/stats").json()
        finally:
            os.kill(os.getpid(), signal.SIGTERM)  # what a supervisor or Ctrl-C does

    before = signal.getsignal(signal.SIGTERM)
    user = threading.Thread(target=use_then_terminate)
    user.start()
    assert run_sim(args) == 0
    user.join(timeout=10)
    assert signal.getsignal(signal.SIGTERM) is before  # handlers are restored
    out = capsys.readouterr().out
    assert f"simulated TAB feed at {root}/affiliates/v1/racing" in out and "stopped" in out
    assert seen["meetings"]["header"]["title"] == "Race Meetings" and seen["meetings"]["data"]["meetings"]
    assert seen["stats"]["requests"] == {"/meetings": 1} and seen["stats"]["config"]["seed"] == 4
    with pytest.raises(httpx.TransportError):
        httpx.get(f"{root}/_sim/stats", timeout=1)
