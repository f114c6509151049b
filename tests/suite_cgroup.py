"""The suite runs in a cpu cgroup of its own, so how the host started it does not change how its CPU is shared.

The kernel's autogroups apply only to processes in the root cpu cgroup. There every session weighs as one: a whole
stack (`dagster dev`: daemon, webserver, code servers and every run worker) counted as much as one worker running short
files, and its catch-up after an outage starved (the outage test 1,368-1,541 s and a failed run start,
BENCHMARKS.md "Test suite"). In a child cgroup each process weighs on its own; the suite was green there
with the outage test at 652-744 s. Whether CI starts `make test` in the root cgroup or in a child one
is the runner's choice (a shell here starts it in the root one; where the project's CI starts it is not known), so the
pytest controller, before it starts its workers, moves itself into a child cgroup when it finds itself in the root
one. It needs root and the cgroup v1 cpu hierarchy (this machine's); elsewhere the suite runs where it was started.
`SUITE_OWN_CPU_CGROUP=0` leaves it there, to measure the two layouts side by side.
"""

from __future__ import annotations

import os
from contextlib import suppress
from pathlib import Path

from tests.production.docker_engine import CGROUP_ROOT, cpu_cgroup

CGROUP_PREFIX = "pytest-suite-"
OPT_OUT = "SUITE_OWN_CPU_CGROUP"
# Written beside the run's other artifacts when the suite moved: bench/suite_host.py's report names the cgroup the
# suite ran in, which `make test` (started in the root one) cannot see after pytest has left it.
SUITE_CGROUP_RECORD = "suite-cpu-cgroup.txt"


def wants_own_cgroup(current: str, environ: dict[str, str] | os._Environ = os.environ) -> bool:
    """Only from the root cpu cgroup (a child one already weighs processes one by one), unless opted out."""
    return current == "/" and environ.get(OPT_OUT, "1") != "0"


def move_to_cgroup(pid: int, directory: Path) -> bool:
    """Move process `pid` (all its threads: cgroup v1 `cgroup.procs`) into the cgroup `directory`."""
    try:
        (directory / "cgroup.procs").write_text(f"{pid}\n")
    except OSError:
        return False
    return True


def enter_own_cpu_cgroup(pid: int, cgroup_root: Path = CGROUP_ROOT, proc_cgroup: Path | None = None,
                         environ: dict[str, str] | os._Environ = os.environ) -> Path | None:
    """Move `pid` from the root cpu cgroup into a new child one; its directory, or None where it was left."""
    hierarchy = cgroup_root / "cpu"
    if not (hierarchy / "cpu.shares").exists():  # not cgroup v1's cpu hierarchy
        return None
    current = cpu_cgroup((proc_cgroup or Path(f"/proc/{pid}/cgroup")).read_text())
    if not wants_own_cgroup(current, environ):
        return None
    own = hierarchy / f"{CGROUP_PREFIX}{pid}"
    try:
        own.mkdir(exist_ok=True)
    except OSError:  # not root, or a read-only cgroup tree
        return None
    if not move_to_cgroup(pid, own):
        with suppress(OSError):
            own.rmdir()
        return None
    return own


def record_own_cgroup(own: Path, artifacts: Path, cgroup_root: Path = CGROUP_ROOT) -> None:
    """Write the cgroup the suite moved into (as /proc names it) to `artifacts`. An older run's record is left: the
    report reads it only when it is newer than its own start (a pytest a test runs inside the suite, already in the
    suite's cgroup, must not remove the suite's record)."""
    artifacts.mkdir(parents=True, exist_ok=True)
    (artifacts / SUITE_CGROUP_RECORD).write_text(f"/{own.relative_to(cgroup_root / 'cpu').as_posix()}\n")


def leave_own_cpu_cgroup(pid: int, own: Path) -> bool:
    """Move `pid` back to the parent cgroup and remove `own` with any empty cgroups under it (a test engine's
    `docker`); False if something is still in it."""
    moved = move_to_cgroup(pid, own.parent)
    for directory in sorted((p for p in own.rglob("*") if p.is_dir()), key=lambda p: len(p.parts), reverse=True):
        with suppress(OSError):
            directory.rmdir()
    try:
        own.rmdir()
    except OSError:
        return False
    return moved
