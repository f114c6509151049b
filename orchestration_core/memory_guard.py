"""Runs a long-lived command as its child and restarts it in place when its process tree's memory passes a bound.

Dagster's daemon and code servers grow in memory over weeks (dagster-io/dagster#32070, in Dagster's own code). The
bound an operator can accept is a memory limit with an orderly restart: SIGTERM to the child's process group, up to a
grace period for it to stop, SIGKILL after that, and the same command started again. The daemon loses nothing by it:
checkpoint claims live in the race database's ledger (racing_orchestration/race_db/checkpoints.py) and the run queue
in Postgres.

Usage:

    python memory_guard.py --name dagster-daemon [--restart-above-mib N] [--check-every-seconds S]
                           [--grace-seconds G] -- command args...

Every S seconds (default 30) the guard sums the proportional set size (PSS, from /proc/PID/smaps_rollup: a page shared
by k processes counts 1/k to each, so a forked tree is not counted twice) of every process below it; when that sum is
above N MiB on two readings in a row it logs one line to stderr and restarts the command. The bound is
--restart-above-mib or, without it, MEMORY_GUARD_RESTART_ABOVE_MIB; unset or 0 means never restart (supervise only).
SIGTERM and SIGINT to the guard go on to the child's group, and the guard exits with the child's exit code. A child
that exits by itself ends the guard with its code (128 + the signal's number when a signal killed it): the
container's restart policy decides what comes next, and a crashing command is not restarted here in a loop.

As a container's PID 1 the guard also reaps orphaned grandchildren, as an init does, and counts their memory while
they live (they are reparented to it).

The file must stay standalone, standard library only: deploy/Dockerfile.dagster copies it alone into an image without
the project's packages.
"""

from __future__ import annotations

import argparse
import math
import os
import select
import signal
import sys
import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

BOUND_VARIABLE = "MEMORY_GUARD_RESTART_ABOVE_MIB"
# Readings in a row above the bound before a restart: one reading can catch a short peak (a sensor tick building a
# big result) that is freed a moment later.
READINGS_IN_A_ROW = 2
DEFAULT_CHECK_EVERY_SECONDS = 30.0
DEFAULT_GRACE_SECONDS = 60.0
# The guard's exit code when the command cannot be started at all, as a shell's.
COMMAND_NOT_FOUND = 127
PREFIX = "memory-guard:"
# Signals the guard passes on to the command's group, then exits with the command's code.
STOP_SIGNALS = (signal.SIGTERM, signal.SIGINT)


# --- pure decisions -------------------------------------------------------------------------------------------------


def parse_pss_kib(smaps_rollup: str) -> int | None:
    """The `Pss:` figure (kB) of a /proc/PID/smaps_rollup text, or None when the text has none (a kernel thread's
    empty file, a process that exited while being read)."""
    for line in smaps_rollup.splitlines():
        if line.startswith("Pss:"):
            fields = line.split()
            if len(fields) >= 2 and fields[1].isdigit():
                return int(fields[1])
            return None
    return None


def parse_stat_ppid(stat: str) -> int | None:
    """The parent pid from a /proc/PID/stat text. The command name (field 2, in parentheses) may itself hold spaces and
    parentheses, so the fields are read after its last ')'."""
    _, closing, rest = stat.rpartition(")")
    fields = rest.split()
    if not closing or len(fields) < 2 or not fields[1].isdigit():
        return None
    return int(fields[1])


def descendants(root: int, parents: Mapping[int, int]) -> set[int]:
    """Every pid below `root` (not `root` itself) in a pid -> parent pid map."""
    children: dict[int, list[int]] = {}
    for pid, ppid in parents.items():
        children.setdefault(ppid, []).append(pid)
    found: set[int] = set()
    pending = list(children.get(root, ()))
    while pending:
        pid = pending.pop()
        if pid not in found:
            found.add(pid)
            pending.extend(children.get(pid, ()))
    return found


def is_above(tree_pss_kib: int, bound_mib: int) -> bool:
    """Strictly above: a tree of exactly the bound is within it."""
    return tree_pss_kib > bound_mib * 1024


def next_streak(streak: int, tree_pss_kib: int | None, bound_mib: int | None) -> int:
    """Readings in a row above the bound, after one more reading. No bound never counts; a reading that could not be
    taken (None) starts the count again, since nothing is known of that moment."""
    if bound_mib is None or tree_pss_kib is None or not is_above(tree_pss_kib, bound_mib):
        return 0
    return streak + 1


def restart_due(streak: int) -> bool:
    return streak >= READINGS_IN_A_ROW


def bound_from(argument: int | None, environment_value: str | None) -> int | None:
    """The bound in MiB: the argument, else the environment variable; None (never restart) when unset, empty or 0.
    A value that is not a whole number of MiB >= 0 is a ValueError, not a silent "no bound"."""
    if argument is not None:
        value = argument
    elif environment_value is None or not environment_value.strip():
        return None
    else:
        text = environment_value.strip()
        if not text.isdigit():
            raise ValueError(f"{BOUND_VARIABLE}={environment_value!r} is not a whole number of MiB")
        value = int(text)
    if value < 0:
        raise ValueError(f"the restart bound must be 0 (never) or a positive number of MiB, not {value}")
    return value or None


def pss_mib_shown(tree_pss_kib: int) -> int:
    """Rounded up for the log line, so a tree just above the bound never reads as equal to it."""
    return math.ceil(tree_pss_kib / 1024)


def restart_line(name: str, tree_pss_kib: int, bound_mib: int, restart_number: int) -> str:
    return (f"{PREFIX} {name} restarting: tree PSS {pss_mib_shown(tree_pss_kib)} MiB above {bound_mib} MiB "
            f"(restart {restart_number})")


def exit_code(wait_status: int) -> int:
    """The guard's exit code for a child's wait status: its own code, or 128 + N when signal N ended it."""
    code = os.waitstatus_to_exitcode(wait_status)
    return 128 - code if code < 0 else code


# --- reading /proc --------------------------------------------------------------------------------------------------


def _read(path: str) -> str | None:
    try:
        with open(path, encoding="ascii", errors="replace") as file:
            return file.read()
    except OSError:  # the process exited meanwhile, or its memory is not ours to read
        return None


def process_parents(proc: str = "/proc") -> dict[int, int]:
    """pid -> parent pid of every process visible in `proc`."""
    parents = {}
    for entry in os.listdir(proc):
        if entry.isdigit():
            stat = _read(f"{proc}/{entry}/stat")
            ppid = parse_stat_ppid(stat) if stat is not None else None
            if ppid is not None:
                parents[int(entry)] = ppid
    return parents


def tree_pss_kib(pids: Iterable[int], proc: str = "/proc") -> int | None:
    """The summed PSS (kB) of `pids`; None when not one of them could be read (then nothing is known)."""
    total, read = 0, False
    for pid in pids:
        text = _read(f"{proc}/{pid}/smaps_rollup")
        pss = parse_pss_kib(text) if text is not None else None
        if pss is not None:
            total, read = total + pss, True
    return total if read else None


def measure_below(root: int, proc: str = "/proc") -> int | None:
    """The PSS (kB) of every process below `root`: the command's tree, and orphans reparented to the guard."""
    return tree_pss_kib(descendants(root, process_parents(proc)), proc)


# --- supervising ----------------------------------------------------------------------------------------------------


def log(line: str) -> None:
    print(line, file=sys.stderr, flush=True)


@dataclass
class Signals:
    """The guard's signals, delivered through a pipe (signal.set_wakeup_fd) so the loop sleeps in select() until a
    signal, the child's exit (SIGCHLD) or the next reading, without polling."""

    read_fd: int
    stop_signal: int | None = None

    @classmethod
    def install(cls) -> Signals:
        read_fd, write_fd = os.pipe()
        os.set_blocking(read_fd, False)
        os.set_blocking(write_fd, False)
        signal.set_wakeup_fd(write_fd)
        for number in (*STOP_SIGNALS, signal.SIGCHLD):
            signal.signal(number, lambda *_: None)  # the wakeup byte is the message
        return cls(read_fd)

    def wait(self, timeout: float) -> list[int]:
        """Signal numbers received within `timeout` seconds (empty when none came)."""
        ready, _, _ = select.select([self.read_fd], [], [], max(0.0, timeout))
        if not ready:
            return []
        try:
            return list(os.read(self.read_fd, 512))
        except BlockingIOError:
            return []


class Child:
    """The command, in a process group of its own (pgid = its pid), so a stop reaches everything it started."""

    def __init__(self, command: Sequence[str]) -> None:
        # Python ignores SIGPIPE and SIGXFSZ; an ignored signal stays ignored across exec, so give the command the
        # defaults a shell would (as subprocess's restore_signals does).
        self.pid = os.posix_spawnp(command[0], list(command), os.environ, setpgroup=0,
                                   setsigdef=(signal.SIGPIPE, signal.SIGXFSZ))
        self.status: int | None = None

    def reap(self) -> None:
        """Collect every exited child: ours (its status kept) and, as PID 1 in a container, orphans."""
        while True:
            try:
                pid, status = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                return
            if pid == 0:
                return
            if pid == self.pid:
                self.status = status

    @property
    def exited(self) -> bool:
        return self.status is not None

    def signal_group(self, number: int) -> None:
        try:
            os.killpg(self.pid, number)
        except ProcessLookupError:  # the whole group is gone already
            pass


def stop(child: Child, signals: Signals, grace_seconds: float, first: int = signal.SIGTERM) -> None:
    """`first` (SIGTERM, or the stop signal the guard received) to the child's group, up to `grace_seconds` for the
    child to exit, then SIGKILL to whatever is left of the group: stragglers of an old tree must not overlap a new one.
    A stop signal arriving meanwhile is forwarded too, and remembered."""
    child.signal_group(first)
    deadline = time.monotonic() + grace_seconds
    child.reap()
    while not child.exited and time.monotonic() < deadline:
        for number in signals.wait(deadline - time.monotonic()):
            if number in STOP_SIGNALS:
                signals.stop_signal = number
                child.signal_group(number)
        child.reap()
    if not child.exited:
        log(f"{PREFIX} pid {child.pid} still running {grace_seconds:g} s after {signal.Signals(first).name}: SIGKILL")
    child.signal_group(signal.SIGKILL)
    while not child.exited:
        try:
            _, status = os.waitpid(child.pid, 0)
        except ChildProcessError:  # reap() collected it between the checks, and kept its status
            break
        child.status = status
    child.reap()


def supervise(name: str, command: Sequence[str], bound_mib: int | None, check_every_seconds: float,
              grace_seconds: float, proc: str = "/proc") -> int:
    """Run `command` until it exits or the guard is told to stop, restarting it above the bound; the exit code."""
    signals = Signals.install()
    guard_pid = os.getpid()
    restarts = 0
    bound_text = f"restart above {bound_mib} MiB of tree PSS" if bound_mib else "no memory bound"
    log(f"{PREFIX} {name}: {bound_text}, read every {check_every_seconds:g} s")
    while True:
        try:
            child = Child(command)
        except OSError as error:
            log(f"{PREFIX} {name}: cannot start {command[0]!r}: {error}")
            return COMMAND_NOT_FOUND
        streak, next_reading, unreadable_logged = 0, time.monotonic() + check_every_seconds, False
        while True:
            for number in signals.wait(next_reading - time.monotonic()):
                if number in STOP_SIGNALS:
                    signals.stop_signal = number
            if signals.stop_signal is not None:
                stop(child, signals, grace_seconds, first=signals.stop_signal)
                return exit_code(child.status)
            child.reap()
            if child.exited:
                log(f"{PREFIX} {name} exited by itself (exit code {exit_code(child.status)})")
                child.signal_group(signal.SIGKILL)  # what it left behind in its group
                return exit_code(child.status)
            if time.monotonic() < next_reading:
                continue
            next_reading = time.monotonic() + check_every_seconds
            if bound_mib is None:
                continue
            pss = measure_below(guard_pid, proc)
            child.reap()
            if pss is None and not child.exited and not unreadable_logged:  # an exit is taken up on the next pass
                log(f"{PREFIX} {name}: cannot read the PSS of pid {child.pid} ({proc}/PID/smaps_rollup): memory not "
                    "checked")
                unreadable_logged = True
            streak = next_streak(streak, pss, bound_mib)
            if restart_due(streak):
                restarts += 1
                log(restart_line(name, pss, bound_mib, restarts))
                stop(child, signals, grace_seconds)
                if signals.stop_signal is not None:  # told to stop during the restart: do not start it again
                    return exit_code(child.status)
                break


def positive_seconds(text: str) -> float:
    value = float(text)
    if not value > 0 or math.isinf(value):
        raise argparse.ArgumentTypeError(f"{text!r} is not a positive number of seconds")
    return value


def non_negative_mib(text: str) -> int:
    if not text.isdigit():
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number of MiB")
    return int(text)


def parse_args(argv: Sequence[str]) -> argparse.Namespace:
    """The guard's options before the first `--`, the command after it (taken verbatim, its own `--` included)."""
    parser = argparse.ArgumentParser(prog="memory_guard.py", usage="%(prog)s --name NAME [options] -- command args...",
                                     description=__doc__.split("\n\n")[0])
    parser.add_argument("--name", required=True, help="what the log lines call the command")
    parser.add_argument("--restart-above-mib", type=non_negative_mib, default=None,
                        help=f"restart above this tree PSS (MiB); default ${BOUND_VARIABLE}; 0 = never")
    parser.add_argument("--check-every-seconds", type=positive_seconds, default=DEFAULT_CHECK_EVERY_SECONDS)
    parser.add_argument("--grace-seconds", type=positive_seconds, default=DEFAULT_GRACE_SECONDS,
                        help="how long a stopping command gets after SIGTERM before SIGKILL")
    argv = list(argv)
    split = argv.index("--") if "--" in argv else len(argv)
    args = parser.parse_args(argv[:split])
    args.command = argv[split + 1:]
    if not args.command:
        parser.error("no command given: put it after --")
    return args


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(sys.argv[1:] if argv is None else argv)
    try:
        bound_mib = bound_from(args.restart_above_mib, os.environ.get(BOUND_VARIABLE))
    except ValueError as error:
        log(f"{PREFIX} {args.name}: {error}")
        return 2
    return supervise(args.name, args.command, bound_mib, args.check_every_seconds, args.grace_seconds)


if __name__ == "__main__":
    sys.exit(main())
