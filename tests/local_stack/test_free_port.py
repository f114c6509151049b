"""free_port(): the ports the tests hand to their stacks' processes, which bind them seconds later."""

import socket

import pytest

from local_stack import stack
from local_stack.stack import LOWEST_PICKED_PORT, ephemeral_port_range, free_port

pytestmark = pytest.mark.unit


def test_picks_a_bindable_port_below_the_kernels_ephemeral_range() -> None:
    low, _ = ephemeral_port_range()
    ports = {free_port() for _ in range(20)}
    assert all(LOWEST_PICKED_PORT <= port < low for port in ports), ports
    assert len(ports) > 1, "picked at random, not the same port every time"
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", ports.pop()))


def test_skips_a_port_in_use(monkeypatch) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        busy = taken.getsockname()[1]
        real = stack._PORT_PICKER.randrange
        picks = iter([busy, busy, busy])  # the first three picks land on the busy port, then real ones
        monkeypatch.setattr(stack._PORT_PICKER, "randrange", lambda low, high: next(picks, None) or real(low, high))
        assert free_port() != busy


def test_reads_the_range_the_kernel_uses(tmp_path, monkeypatch) -> None:
    ranges = tmp_path / "ip_local_port_range"
    ranges.write_text("40000\t50000\n")
    monkeypatch.setattr(stack, "EPHEMERAL_PORTS", ranges)
    assert ephemeral_port_range() == (40000, 50000)
    monkeypatch.setattr(stack, "EPHEMERAL_PORTS", tmp_path / "missing")
    assert ephemeral_port_range() == (32768, 60999)
