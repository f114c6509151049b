"""What the host gave the test suite: a few lines `make test` prints after pytest, where a CI log's tail shows them.

    .venv/bin/python bench/suite_host.py snapshot test-artifacts/host-start.json     # before pytest
    .venv/bin/python bench/suite_host.py report test-artifacts/host-start.json [test-artifacts/junit.xml]

The suite's timing tests depend on how the kernel shares the 2 cores between its workers, its local stacks and the
Docker engine's containers (tests/conftest.py, "Who gets the CPU first"; tests/production/docker_engine.py): where the
suite runs in a child cpu cgroup the kernel's autogroups do not apply, and a run elsewhere than on the reference
machine may get less of the CPU (steal time, another tenant). The report names the cgroup, whether autogroups apply,
the CPU seconds the run had (busy, idle, stolen), and when each worker ended and on what, so that a failed CI run
says whether it was starved and where, without anything but its log. It never fails the build.
"""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from suite_times import read_report, worker_timelines  # noqa: E402  (a script beside this one)
from tests.production.docker_engine import cpu_cgroup  # noqa: E402  (where the test engine places its containers)
from tests.suite_cgroup import SUITE_CGROUP_RECORD  # noqa: E402  (the cgroup of its own pytest moved into)

PROC_STAT = Path("/proc/stat")
PROC_CGROUP = Path("/proc/self/cgroup")
AUTOGROUP_SWITCH = Path("/proc/sys/kernel/sched_autogroup_enabled")
# /proc/stat's cpu line: user nice system idle iowait irq softirq steal (guest time is inside user already).
CPU_FIELDS = ("user", "nice", "system", "idle", "iowait", "irq", "softirq", "steal")


def read_text(path: Path) -> str:
    try:
        return path.read_text()
    except OSError:
        return ""


def cpu_seconds(stat_text: str, ticks: int) -> dict[str, float]:
    """The host's CPU seconds since boot by state, from /proc/stat's first line."""
    values = stat_text.splitlines()[0].split()[1:1 + len(CPU_FIELDS)]
    return {name: int(value) / ticks for name, value in zip(CPU_FIELDS, values, strict=False)}


def cpu_share(start: dict[str, float], end: dict[str, float]) -> dict[str, float]:
    """CPU seconds between two readings: busy (user, nice, system, irq), idle (with iowait) and stolen."""
    delta = {name: end.get(name, 0.0) - start.get(name, 0.0) for name in CPU_FIELDS}
    return {"busy": sum(delta[n] for n in ("user", "nice", "system", "irq", "softirq")),
            "idle": delta["idle"] + delta["iowait"], "steal": delta["steal"]}


def snapshot() -> dict:
    return {"at": time.time(), "cpu": cpu_seconds(read_text(PROC_STAT), os.sysconf("SC_CLK_TCK")),
            "load": os.getloadavg()[0]}


def report_lines(start: dict, end: dict, cgroup_text: str, autogroup_switch: str, workers: list,
                 longest: list[tuple[str, float]], suite_cgroup: str | None = None) -> list[str]:
    """`suite_cgroup`: the cpu cgroup of its own pytest moved into (tests/suite_cgroup.py), when it did."""
    cgroup = cpu_cgroup(cgroup_text)
    autogroups = autogroup_switch.strip() == "1" and cgroup == "/" and not suite_cgroup
    if suite_cgroup:
        cgroup = f"{suite_cgroup} (its own; started in {cgroup})"
    share = cpu_share(start["cpu"], end["cpu"])
    wall = end["at"] - start["at"]
    lines = [f"suite host: uid {os.geteuid()}, nice {os.getpriority(os.PRIO_PROCESS, 0)}, {os.cpu_count()} cores, "
             f"cpu cgroup {cgroup} (autogroups {'apply' if autogroups else 'do not apply'}); "
             f"load {start['load']:.1f} at the start, {end['load']:.1f} at the end",
             f"suite host: {wall:.0f} s: {share['busy']:.0f} CPU-s busy, {share['idle']:.0f} idle, "
             f"{share['steal']:.0f} stolen by the hypervisor"]
    if longest:
        lines.append("suite host: longest files " + ", ".join(f"{path} {seconds:.0f} s" for path, seconds in longest))
    for worker, busy, ended, last_file, files in workers:
        lines.append(f"suite host: {worker} ended {ended:.0f} s after the first test, {busy:.0f} s busy, "
                     f"{files} files, last {last_file}")
    return lines


def main(argv: list[str]) -> int:
    try:
        if len(argv) == 2 and argv[0] == "snapshot":
            Path(argv[1]).parent.mkdir(parents=True, exist_ok=True)
            Path(argv[1]).write_text(json.dumps(snapshot()))
            return 0
        if len(argv) in (2, 3) and argv[0] == "report":
            start = json.loads(Path(argv[1]).read_text())
            workers, longest = [], []
            junit = Path(argv[2]) if len(argv) == 3 else None
            if junit and junit.exists() and junit.stat().st_mtime >= start["at"]:  # this run's, not one left before
                report = read_report(junit)
                workers = worker_timelines(report.timeline)
                longest = sorted(report.per_file.items(), key=lambda item: -item[1])[:3]
            record = Path(argv[1]).parent / SUITE_CGROUP_RECORD
            suite_cgroup = (record.read_text().strip() or None
                            if record.exists() and record.stat().st_mtime >= start["at"] else None)
            lines = report_lines(start, snapshot(), read_text(PROC_CGROUP), read_text(AUTOGROUP_SWITCH), workers,
                                 longest, suite_cgroup)
            print("\n".join(lines))
            return 0
    except (OSError, ValueError, KeyError) as exc:  # a diagnosis, never the build's outcome
        print(f"suite host: no report ({exc})")
        return 0
    print(__doc__.split("\n\n")[1], file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
