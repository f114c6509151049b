"""orchestration_core/memory_guard.py: its decisions as pure functions, its /proc readings against real processes, and
the guard itself as the daemon's container runs it (the file alone, in a Python of its own) around real commands that
allocate memory, exit, ignore SIGTERM or wait for a signal. (The compose and Kubernetes daemon commands that use it:
tests/deploy/kubernetes/test_parity.py.)"""

from __future__ import annotations

import ast
import os
import re
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from orchestration_core.memory_guard import (
    BOUND_VARIABLE,
    bound_from,
    descendants,
    exit_code,
    is_above,
    measure_below,
    next_streak,
    parse_args,
    parse_pss_kib,
    parse_stat_ppid,
    process_parents,
    restart_due,
    restart_line,
    tree_pss_kib,
)
from tests.conftest import REPO_ROOT

GUARD = REPO_ROOT / "orchestration_core" / "memory_guard.py"
MIB = 1024  # kB

# A real /proc/PID/smaps_rollup (Linux 6.x); the Pss_* lines must not be taken for Pss.
ROLLUP = """55a4fc044000-7ffd24501000 ---p 00000000 00:00 0                          [rollup]
Rss:                1708 kB
Pss:                 428 kB
Pss_Dirty:           116 kB
Pss_Anon:            116 kB
Pss_File:            312 kB
Shared_Clean:       1520 kB
"""


# --- pure decisions -------------------------------------------------------------------------------------------------


@pytest.mark.unit
@pytest.mark.parametrize(("text", "pss_kib"), [
    (ROLLUP, 428),
    ("Pss_Dirty:   116 kB\nPss_Anon:   116 kB\nPss:   9 kB\n", 9),  # Pss read by name, not by position
    ("Pss:  402432 kB\n", 402432),
    ("Rss:   1708 kB\n", None),  # no Pss line
    ("", None),  # a kernel thread's file is empty
    ("Pss:\n", None),  # cut short while the process exited
])
def test_parse_pss_kib(text: str, pss_kib: int | None) -> None:
    assert parse_pss_kib(text) == pss_kib


@pytest.mark.unit
@pytest.mark.parametrize(("stat", "ppid"), [
    ("4242 (python3) S 17 4242 4242 0 -1 4194560 1260 0 0 0", 17),
    ("4242 (dagster-daemon) R 1 4242 4242 0 -1", 1),
    ("99 (a) S 5 (b) R 31 99 99 0", 31),  # a command name holding ") S 5 (": the fields follow its last ')'
    ("4242 (tricky name) S 8 4242", 8),
    ("", None),
    ("4242 python3 S 17", None),  # no parenthesised name: not a stat line
])
def test_parse_stat_ppid(stat: str, ppid: int | None) -> None:
    assert parse_stat_ppid(stat) == ppid


@pytest.mark.unit
@pytest.mark.parametrize(("root", "parents", "below"), [
    (10, {11: 10, 12: 11, 13: 12, 20: 1, 21: 20}, {11, 12, 13}),  # children, grandchildren, great-grandchildren
    (10, {11: 10, 12: 10, 10: 1}, {11, 12}),  # not the root itself, nor its parent
    (10, {20: 1, 21: 20}, set()),  # nothing below it
    (11, {11: 10, 12: 11, 13: 10}, {12}),  # a sibling is not below
])
def test_descendants(root: int, parents: dict[int, int], below: set[int]) -> None:
    assert descendants(root, parents) == below


@pytest.mark.unit
@pytest.mark.parametrize(("pss_kib", "bound_mib", "above"), [
    (384 * MIB - 1, 384, False),
    (384 * MIB, 384, False),  # exactly the bound is within it
    (384 * MIB + 1, 384, True),
    (402 * MIB, 384, True),
])
def test_is_above_is_strict(pss_kib: int, bound_mib: int, above: bool) -> None:
    assert is_above(pss_kib, bound_mib) is above


@pytest.mark.unit
@pytest.mark.parametrize(("streak", "pss_kib", "bound_mib", "after"), [
    (0, 400 * MIB, 384, 1),
    (1, 400 * MIB, 384, 2),
    (1, 384 * MIB, 384, 0),  # back to exactly the bound: the count starts again
    (1, 100 * MIB, 384, 0),
    (1, None, 384, 0),  # an unreadable tree: nothing known, the count starts again
    (5, 900 * MIB, None, 0),  # no bound never counts
])
def test_next_streak(streak: int, pss_kib: int | None, bound_mib: int | None, after: int) -> None:
    assert next_streak(streak, pss_kib, bound_mib) == after


def restart_readings(readings_mib: list[float], bound_mib: int) -> list[int]:
    """The 1-based readings at which the guard restarts, folding next_streak and restart_due as its loop does (a
    restart starts a new command, so a new count)."""
    streak, restarts = 0, []
    for number, mib in enumerate(readings_mib, start=1):
        streak = next_streak(streak, round(mib * MIB), bound_mib)
        if restart_due(streak):
            restarts.append(number)
            streak = 0
    return restarts


@pytest.mark.unit
@pytest.mark.parametrize(("readings_mib", "restarts"), [
    ([390, 390], [2]),  # two in a row
    ([390], []),  # one reading above: a peak, no restart
    ([390, 300, 390, 300, 390], []),  # never two in a row
    ([300, 390, 384, 390, 390.01], [5]),  # exactly the bound breaks the run
    ([384, 384, 384], []),
    ([390, 390, 390, 390], [2, 4]),  # still above after the restart: counted afresh
])
def test_two_consecutive_readings_above_restart(readings_mib: list[float], restarts: list[int]) -> None:
    assert restart_readings(readings_mib, 384) == restarts


@pytest.mark.unit
@pytest.mark.parametrize(("argument", "environment", "bound"), [
    (None, None, None),  # unset: never restart
    (None, "", None),  # compose passes an unused variable as empty
    (None, "0", None),
    (None, "384", 384),
    (None, " 384 ", 384),
    (512, "384", 512),  # the argument wins
    (0, "384", None),  # ...also when it says never
])
def test_bound_from(argument: int | None, environment: str | None, bound: int | None) -> None:
    assert bound_from(argument, environment) == bound


@pytest.mark.unit
@pytest.mark.parametrize(("argument", "environment"), [(None, "384MiB"), (None, "-5"), (None, "1.5"), (-1, None)])
def test_a_bound_that_is_not_a_whole_mib_count_is_an_error_not_no_bound(argument, environment) -> None:
    with pytest.raises(ValueError, match="MiB"):
        bound_from(argument, environment)


@pytest.mark.unit
def test_restart_line() -> None:
    assert restart_line("dagster-daemon", 402 * MIB, 384, 3) == (
        "memory-guard: dagster-daemon restarting: tree PSS 402 MiB above 384 MiB (restart 3)")
    # Just above the bound reads as above it, never as "384 MiB above 384 MiB".
    assert restart_line("d", 384 * MIB + 1, 384, 1) == "memory-guard: d restarting: tree PSS 385 MiB above 384 MiB (restart 1)"


@pytest.mark.unit
@pytest.mark.parametrize(("wait_status", "code"), [
    (0, 0),
    (3 << 8, 3),  # exit(3)
    (signal.SIGTERM, 128 + 15),  # killed by SIGTERM, as a shell reports it
    (signal.SIGKILL, 128 + 9),
])
def test_exit_code(wait_status: int, code: int) -> None:
    assert exit_code(wait_status) == code


@pytest.mark.unit
def test_the_command_is_everything_after_the_first_double_dash() -> None:
    args = parse_args(["--name", "dagster-daemon", "--restart-above-mib", "384", "--", "dagster-daemon", "run",
                       "--name", "x", "--", "y"])
    assert (args.name, args.restart_above_mib, args.check_every_seconds, args.grace_seconds) == (
        "dagster-daemon", 384, 30.0, 60.0)
    assert args.command == ["dagster-daemon", "run", "--name", "x", "--", "y"]


@pytest.mark.unit
@pytest.mark.parametrize("argv", [
    ["--name", "d"],  # no command
    ["--name", "d", "--"],
    ["--", "true"],  # no name
    ["--name", "d", "--restart-above-mib", "-1", "--", "true"],
    ["--name", "d", "--check-every-seconds", "0", "--", "true"],
])
def test_bad_arguments_stop_with_usage(argv: list[str]) -> None:
    with pytest.raises(SystemExit) as stopped:
        parse_args(argv)
    assert stopped.value.code == 2


@pytest.mark.unit
def test_the_file_imports_the_standard_library_only() -> None:
    """The Dagster image holds this one file and no project package (deploy/Dockerfile.dagster)."""
    imported = set()
    for node in ast.walk(ast.parse(GUARD.read_text())):
        if isinstance(node, ast.Import):
            imported |= {alias.name.split(".")[0] for alias in node.names}
        elif isinstance(node, ast.ImportFrom):
            imported.add(node.module.split(".")[0])
    assert imported and sorted(imported - set(sys.stdlib_module_names)) == []


@pytest.mark.unit
def test_the_dagster_image_has_it_where_the_commands_run_it() -> None:
    dockerfile = (REPO_ROOT / "deploy" / "Dockerfile.dagster").read_text()
    assert "COPY orchestration_core/memory_guard.py /opt/dagster/memory_guard.py" in dockerfile
    ignore = (REPO_ROOT / "deploy" / "Dockerfile.dagster.dockerignore").read_text().splitlines()
    assert "!orchestration_core/memory_guard.py" in ignore


# --- /proc of real processes ----------------------------------------------------------------------------------------


def spawn_holding(mib: int) -> subprocess.Popen:
    """A Python process holding `mib` MiB of written (so resident) memory until killed; it says when it holds it."""
    process = subprocess.Popen([sys.executable, "-c", f"import sys, time\nheld = b'x' * ({mib} << 20)\n"
                                "print('held', flush=True)\ntime.sleep(120)"], stdout=subprocess.PIPE, text=True)
    assert process.stdout.readline() == "held\n"
    return process


@pytest.mark.unit
def test_the_readings_find_a_real_child_and_its_memory() -> None:
    holder = spawn_holding(64)
    try:
        assert process_parents()[holder.pid] == os.getpid()
        assert holder.pid in descendants(os.getpid(), process_parents())
        assert tree_pss_kib([holder.pid]) > 64 * MIB
        assert measure_below(os.getpid()) >= tree_pss_kib([holder.pid])
    finally:
        holder.kill()
        holder.wait()
    assert tree_pss_kib([holder.pid]) is None  # gone: nothing read, not 0


# --- the guard around real commands ---------------------------------------------------------------------------------

# The supervised command: records its starts and signals in a file; on its first start it (or a grandchild of the
# guard it starts) holds HOLD_MIB of memory and waits, on every later start it exits 7 at once.
COMMAND = """
import os, signal, subprocess, sys, time
journal, where, on_sigterm = sys.argv[1], sys.argv[2], sys.argv[3]
first = not os.path.exists(journal)
def note(line):
    with open(journal, "a") as file:
        file.write(line + "\\n")
def stopped(number, frame):
    note(f"signal {number}")
    sys.exit(40 + number)
if on_sigterm == "ignore":
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
else:
    signal.signal(signal.SIGTERM, stopped)
    signal.signal(signal.SIGINT, stopped)
with open(os.path.join(os.path.dirname(journal), "groups"), "a") as file:
    file.write(f"{os.getpid()}\\n")
note(f"start group-leader={os.getpgid(0) == os.getpid()}")
if not first or where == "exit":
    sys.exit(7)
# The guard may stop it while it is still filling its memory (twice above the bound already): SIGTERM waits until
# "holding" is written, so the journal's order is fixed.
signal.pthread_sigmask(signal.SIG_BLOCK, [signal.SIGTERM])
if where == "child":
    held = b"x" * (HOLD_MIB << 20)
elif where == "grandchild":
    subprocess.Popen([sys.executable, "-c", "import time\\nheld = b'x' * (HOLD_MIB << 20)\\ntime.sleep(120)"])
note("holding")
signal.pthread_sigmask(signal.SIG_UNBLOCK, [signal.SIGTERM])
while True:
    time.sleep(1)
""".replace("HOLD_MIB", "80")


def guard_command(tmp_path: Path, *guard_args: str, where: str = "child", on_sigterm: str = "exit") -> list[str]:
    script = tmp_path / "command.py"
    script.write_text(COMMAND)
    # -I -S: no project, no site-packages, as in the Dagster image where the file stands alone.
    return [sys.executable, "-I", "-S", str(GUARD), "--name", "hungry", "--check-every-seconds", "0.2", *guard_args,
            "--", sys.executable, str(script), str(tmp_path / "journal"), where, on_sigterm]


@pytest.fixture(autouse=True)
def no_command_outlives_its_test(tmp_path: Path) -> Iterator[None]:
    """A guard that failed to stop its command (a failing test) leaves it running in its own group: kill the groups."""
    yield
    groups = tmp_path / "groups"
    for pgid in groups.read_text().split() if groups.exists() else ():
        try:
            os.killpg(int(pgid), signal.SIGKILL)
        except ProcessLookupError:
            pass


def start_guard(command: list[str], tmp_path: Path, env: dict[str, str] | None = None) -> subprocess.Popen:
    """The guard, its stderr to a file: a pipe would also be held open by a command the guard failed to stop."""
    base = {k: v for k, v in os.environ.items() if k != BOUND_VARIABLE}
    with open(tmp_path / "guard.stderr", "w") as stderr:
        return subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=stderr, env={**base, **(env or {})})


def guard_stderr(tmp_path: Path) -> str:
    return (tmp_path / "guard.stderr").read_text()


def run_guard(command: list[str], tmp_path: Path, env: dict[str, str] | None = None,
              timeout: float = 60) -> tuple[int, str]:
    """The guard's exit code and stderr, once it ended by itself."""
    guarded = start_guard(command, tmp_path, env)
    try:
        return guarded.wait(timeout=timeout), guard_stderr(tmp_path)
    finally:
        guarded.kill()
        guarded.wait()


def journal(tmp_path: Path) -> list[str]:
    return (tmp_path / "journal").read_text().splitlines()


RESTART = re.compile(r"memory-guard: hungry restarting: tree PSS (\d+) MiB above 40 MiB \(restart (\d+)\)")


@pytest.mark.unit
@pytest.mark.parametrize(("where", "bound_from_environment"), [
    ("child", False),
    ("child", True),
    ("grandchild", False),  # the tree is summed: the command itself stays small
])
def test_a_command_above_the_bound_is_stopped_with_sigterm_and_started_again(
        tmp_path: Path, where: str, bound_from_environment: bool) -> None:
    bound = ([], {BOUND_VARIABLE: "40"}) if bound_from_environment else (["--restart-above-mib", "40"], {})
    code, stderr = run_guard(guard_command(tmp_path, *bound[0], where=where), tmp_path, env=bound[1])
    assert code == 7, stderr  # the second start exits 7 at once: the guard ends with its code
    assert journal(tmp_path) == ["start group-leader=True", "holding", f"signal {signal.SIGTERM}",
                                 "start group-leader=True"]
    restarts = [RESTART.fullmatch(line) for line in stderr.splitlines() if " restarting: " in line]
    assert len(restarts) == 1 and restarts[0] is not None, stderr
    pss_mib, number = map(int, restarts[0].groups())
    # Above the bound (the command alone is ~10 MiB: with a grandchild holding the memory, the tree was summed).
    assert pss_mib > 40 and number == 1
    assert "memory-guard: hungry exited by itself (exit code 7)" in stderr


@pytest.mark.unit
def test_a_command_ignoring_sigterm_is_killed_after_the_grace_period_and_started_again(tmp_path: Path) -> None:
    started = time.monotonic()
    code, stderr = run_guard(guard_command(tmp_path, "--restart-above-mib", "40", "--grace-seconds", "1.5",
                                           on_sigterm="ignore"), tmp_path)
    assert code == 7, stderr
    assert journal(tmp_path) == ["start group-leader=True", "holding", "start group-leader=True"]
    assert re.search(r"memory-guard: pid \d+ still running 1.5 s after SIGTERM: SIGKILL", stderr)
    assert time.monotonic() - started > 1.5


@pytest.mark.unit
@pytest.mark.parametrize(("guard_args", "env"), [
    ([], {}),  # no bound anywhere
    ([], {BOUND_VARIABLE: "0"}),
    ([], {BOUND_VARIABLE: ""}),
    (["--restart-above-mib", "0"], {BOUND_VARIABLE: "40"}),
])
def test_without_a_bound_the_command_is_only_supervised(tmp_path: Path, guard_args: list[str], env) -> None:
    guarded = start_guard(guard_command(tmp_path, *guard_args), tmp_path, env)
    try:
        wait_for_journal(tmp_path, "holding")
        time.sleep(1.5)  # seven readings at 0.2 s, all of them far above 40 MiB
        assert guarded.poll() is None
        guarded.send_signal(signal.SIGTERM)
        assert guarded.wait(timeout=30) == 40 + signal.SIGTERM
    finally:
        guarded.kill()
        guarded.wait()
    stderr = guard_stderr(tmp_path)
    assert " restarting: " not in stderr and "no memory bound" in stderr
    assert journal(tmp_path) == ["start group-leader=True", "holding", f"signal {signal.SIGTERM}"]


def wait_for_journal(tmp_path: Path, line: str, timeout: float = 30) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if (tmp_path / "journal").exists() and line in journal(tmp_path):
            return
        time.sleep(0.05)
    raise AssertionError(f"the command never wrote {line!r}")


@pytest.mark.unit
@pytest.mark.parametrize("number", [signal.SIGTERM, signal.SIGINT])
def test_a_stop_signal_to_the_guard_reaches_the_command_and_the_guard_exits_with_its_code(
        tmp_path: Path, number: int) -> None:
    """The command runs in its own process group, so only the guard's forwarding can deliver the signal."""
    guarded = start_guard(guard_command(tmp_path, "--restart-above-mib", "4000", where="none"), tmp_path)
    try:
        wait_for_journal(tmp_path, "holding")
        guarded.send_signal(number)
        assert guarded.wait(timeout=30) == 40 + number
    finally:
        guarded.kill()
        guarded.wait()
    stderr = guard_stderr(tmp_path)
    assert journal(tmp_path) == ["start group-leader=True", "holding", f"signal {number}"]
    assert " restarting: " not in stderr


@pytest.mark.unit
@pytest.mark.parametrize(("code", "guard_code"), [
    ("sys.exit(0)", 0),
    ("sys.exit(3)", 3),
    ("os.kill(os.getpid(), signal.SIGKILL)", 128 + 9),
])
def test_a_command_exiting_by_itself_ends_the_guard_with_its_code_and_is_not_restarted(
        tmp_path: Path, code: str, guard_code: int) -> None:
    script = tmp_path / "ends.py"
    script.write_text(f"import os, signal, sys\nwith open({str(tmp_path / 'starts')!r}, 'a') as f:\n"
                      f"    f.write('start\\n')\n{code}\n")
    code, stderr = run_guard([sys.executable, "-I", "-S", str(GUARD), "--name", "ends", "--restart-above-mib", "40",
                              "--", sys.executable, str(script)], tmp_path)
    assert code == guard_code, stderr
    assert (tmp_path / "starts").read_text() == "start\n"
    assert f"memory-guard: ends exited by itself (exit code {guard_code})" in stderr


@pytest.mark.unit
def test_a_command_that_cannot_start_exits_127(tmp_path: Path) -> None:
    code, stderr = run_guard([sys.executable, "-I", "-S", str(GUARD), "--name", "missing", "--",
                              str(tmp_path / "no-such-command")], tmp_path)
    assert code == 127
    assert "memory-guard: missing: cannot start" in stderr


@pytest.mark.unit
def test_a_bad_bound_in_the_environment_stops_the_guard_before_the_command(tmp_path: Path) -> None:
    code, stderr = run_guard(guard_command(tmp_path), tmp_path, env={BOUND_VARIABLE: "384MiB"})
    assert code == 2
    assert f"{BOUND_VARIABLE}='384MiB' is not a whole number of MiB" in stderr
    assert not (tmp_path / "journal").exists()
