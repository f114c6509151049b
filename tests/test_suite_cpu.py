"""bench/suite_cpu.py's process accounting: the kernel's acct_v3 records read, and what ended split by command."""

import importlib.util
import sys

import pytest

from tests.conftest import REPO_ROOT

pytestmark = pytest.mark.unit

spec = importlib.util.spec_from_file_location("suite_cpu", REPO_ROOT / "bench" / "suite_cpu.py")
suite_cpu = importlib.util.module_from_spec(spec)
sys.modules["suite_cpu"] = suite_cpu  # its dataclass looks its module up there
spec.loader.exec_module(suite_cpu)


@pytest.mark.parametrize(
    ("raw", "ticks"),
    [
        (0, 0),
        (1, 1),
        (0x1FFF, 8191),  # the largest mantissa, exponent 0
        ((1 << 13) | 1, 8),  # exponent 1: times 8
        ((2 << 13) | 5, 320),  # exponent 2: times 64
        (0xFFFF, 8191 << 21),  # the largest comp_t
    ],
)
def test_comp_t_is_a_13_bit_mantissa_times_8_to_the_exponent(raw: int, ticks: int) -> None:
    assert suite_cpu.comp_t(raw) == ticks


def record(pid: int, ppid: int, btime: int, utime: int, stime: int, comm: bytes, version: int = 3) -> bytes:
    """One acct_v3 record laid out by hand, offsets as in linux/acct.h (little-endian, as on x86)."""
    data = bytearray(64)
    data[1] = version
    data[16:20] = pid.to_bytes(4, "little")
    data[20:24] = ppid.to_bytes(4, "little")
    data[24:28] = btime.to_bytes(4, "little")
    data[32:34] = utime.to_bytes(2, "little")
    data[34:36] = stime.to_bytes(2, "little")
    data[48:48 + len(comm)] = comm
    return bytes(data)


def test_records_are_read_with_their_cpu_in_seconds() -> None:
    data = (record(4242, 1, 1_790_000_000, 250, 30, b"python")
            + record(4243, 4242, 1_790_000_001, (1 << 13) | 100, 0, b"postgres")
            + b"\x00" * 10)  # a record still being written
    assert suite_cpu.parse_acct(data) == [
        suite_cpu.Ended("python", 4242, 1, 1_790_000_000.0, 2.8),
        suite_cpu.Ended("postgres", 4243, 4242, 1_790_000_001.0, 8.0),
    ]


def test_a_file_of_another_format_is_refused() -> None:
    with pytest.raises(ValueError, match="not an acct_v3 record at byte 64: version 2"):
        suite_cpu.parse_acct(record(1, 0, 0, 0, 0, b"a") + record(2, 0, 0, 0, 0, b"b", version=2))


@pytest.mark.parametrize(
    ("cmdline", "key"),
    [
        ("dagster api grpc --socket /scratch/tmpab12/sock --port 40123", "dagster api grpc --socket * --port *"),
        ("postgres: postgres dagster_7a7af6df5a4e [local] idle", "postgres: postgres dagster_* [local] idle"),
        ("/srv/checkout/.venv/bin/python -c x", "* -c x"),
        ("/srv/checkout-2/bin/python", "/srv/checkout-2/bin/python"),  # another folder that only starts the same
        ("git log -1", "git log -1"),  # nothing that changes from run to run: kept whole
        ("runner 12 45", "runner 12 45"),  # two-digit numbers are kept: only ports, pids and ids vary
    ],
)
def test_a_command_key_stars_out_what_changes_between_runs(cmdline: str, key: str) -> None:
    assert suite_cpu.command_key(cmdline, roots=("/scratch", "/srv/checkout/")) == key


def test_the_varying_folders_are_the_temporary_ones_and_this_checkout() -> None:
    assert str(REPO_ROOT) in suite_cpu.VARYING_ROOTS and "/var/tmp" in suite_cpu.VARYING_ROOTS


def test_what_ended_is_split_by_the_sampled_command_else_by_its_parent() -> None:
    sampler = object.__new__(suite_cpu.Sampler)  # no sampling: the processes a sample would have seen
    sampler.processes = {
        (100, "1"): {"kind": "dagster code server", "command": "python -m dagster api grpc", "started": 1000.4},
        (200, "2"): {"kind": None, "command": "container", "started": 1000.0},
        (300, "3"): {"kind": "other", "command": "/usr/bin/containerd-shim-runc-v2 -id x", "started": 990.0},
        (101, "4"): {"kind": "other python", "command": "python worker", "started": 1500.0},
        (400, "5"): {"kind": "other", "command": "runc init", "started": 1050.0},  # became a container's process
    }
    ended = [
        suite_cpu.Ended("python", 100, 1, 1000.0, 40.0),  # the code server itself
        suite_cpu.Ended("python", 101, 100, 1010.0, 3.0),  # pid 101 reused later: this one no sample saw
        suite_cpu.Ended("python", 102, 100, 1020.0, 3.5),
        suite_cpu.Ended("postgres", 103, 999, 1030.0, 0.5),  # a parent never seen
        suite_cpu.Ended("pg_isready", 201, 200, 1040.0, 9.0),  # in a container: its cgroup counts it
        suite_cpu.Ended("healthcheck", 301, 300, 1040.0, 7.0),  # started by the shim, in the container
        suite_cpu.Ended("dagster", 400, 300, 1050.0, 11.0),
    ]
    assert sampler.ended_by_command(ended) == [
        {"command": "python -m dagster api grpc", "cpu_seconds": 40.0, "processes": 1},
        {"command": "[python] under python -m dagster api grpc", "cpu_seconds": 6.5, "processes": 2},
        {"command": "[postgres] under an unseen parent", "cpu_seconds": 0.5, "processes": 1},
    ]


@pytest.mark.parametrize(
    ("environ", "test_file"),
    [
        (b"HOME=/root\0PYTEST_CURRENT_TEST=tests/e2e/test_live_stack.py::test_x[a::b] (call)\0PATH=/bin\0",
         "tests/e2e/test_live_stack.py"),
        (b"PYTEST_CURRENT_TEST=tests/test_a.py::test_b (setup)", "tests/test_a.py"),  # the block's last entry
        (b"HOME=/root\0PATH=/bin\0", None),  # started outside any test
        (b"NOT_PYTEST_CURRENT_TEST=tests/test_a.py::t (call)\0", None),  # only the variable itself counts
        (b"", None),  # a process that ended before its environ was read
    ],
)
def test_the_test_file_is_read_from_the_inherited_environment(environ: bytes, test_file: str | None) -> None:
    assert suite_cpu.file_of_current_test(environ) == test_file


def test_processes_are_charged_to_the_test_file_that_started_them() -> None:
    sampler = object.__new__(suite_cpu.Sampler)
    sampler.processes = {
        (100, "1"): {"kind": "dagster code server", "command": "grpc", "started": 1000.0, "cpu": 12.0,
                     "test_file": "tests/a.py"},
        (110, "2"): {"kind": "other python", "command": "sim", "started": 1000.0, "cpu": 5.0, "base": 1.0,
                     "test_file": "tests/a.py"},  # 1 CPU-s spent before the run began
        (120, "3"): {"kind": "embedded postgres", "command": "postgres", "started": 1000.0, "cpu": 7.0,
                     "test_file": "tests/b.py"},
        (130, "4"): {"kind": "other", "command": "dockerd", "started": 900.0, "cpu": 50.0, "test_file": None},
    }
    ended = [
        suite_cpu.Ended("python", 101, 100, 1010.0, 2.5),  # a run worker of tests/a.py's code server, never sampled
        suite_cpu.Ended("postgres", 121, 120, 1011.0, 0.5),  # a backend of tests/b.py's server
        suite_cpu.Ended("python", 100, 1, 1000.0, 12.0),  # sampled itself: not counted twice
        suite_cpu.Ended("git", 131, 130, 1012.0, 9.0),  # started by a process no test started
        suite_cpu.Ended("git", 141, 999, 1012.0, 9.0),  # a parent never seen
    ]
    assert sampler.by_test_file(ended) == [
        {"test_file": "tests/a.py", "cpu_seconds": 18.5, "processes": 3},
        {"test_file": "tests/b.py", "cpu_seconds": 7.5, "processes": 2},
    ]
