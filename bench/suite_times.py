"""The test suite's time per file and its slowest tests, from the JUnit XML report `make test` writes.

    make test                                   # writes test-artifacts/junit.xml
    .venv/bin/python bench/suite_times.py [test-artifacts/junit.xml] [--files 25] [--tests 15]

A file's time is the sum of its tests' setup, call and teardown (pytest's `junit_duration_report = total`), which is
what that file costs the worker that runs it whole (tests/conftest.py); the suite's wall time is the report's own
`time`, measured by the controller. A file's CPU is the sum of its tests' `cpu_seconds` property (tests/conftest.py:
the worker's own CPU and that of the subprocesses it reaped; not the containers or servers it left running), which is
what it takes from the others on the CPU-bound 2-core machine. Prints Markdown tables for BENCHMARKS.md ("Test suite").
"""

from __future__ import annotations

import argparse
import sys
import xml.etree.ElementTree as ET
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path


def file_of(classname: str) -> str:
    """`tests.control_api.test_x.TestY` -> tests/control_api/test_x.py (class names inside the module dropped)."""
    parts = classname.split(".")
    while parts and not parts[-1].startswith("test_") and len(parts) > 1:
        parts.pop()
    return "/".join(parts) + ".py"


def property_of(case: ET.Element, name: str) -> str | None:
    """A test case's property (tests/conftest.py: `cpu_seconds`, `worker`, `ended_at`), None where a report has none."""
    for prop in case.iter("property"):
        if prop.get("name") == name:
            return prop.get("value")
    return None


def cpu_seconds_of(case: ET.Element) -> float:
    return float(property_of(case, "cpu_seconds") or 0)


def worker_timelines(cases: list[tuple[str, str, float, float]]) -> list[tuple[str, float, float, str, int]]:
    """(worker, file, seconds, ended_at) per test -> per worker: (worker, busy seconds, end relative to the first
    test's start, the file it ran last, how many files it ran), the last to end first."""
    if not cases:
        return []
    start = min(ended - seconds for _, _, seconds, ended in cases)
    found = []
    for worker in sorted({w for w, _, _, _ in cases}):
        mine = [c for c in cases if c[0] == worker]
        last = max(mine, key=lambda c: c[3])
        found.append((worker, sum(c[2] for c in mine), last[3] - start, last[1], len({c[1] for c in mine})))
    return sorted(found, key=lambda row: -row[2])


@dataclass
class Report:
    per_file: dict[str, float] = field(default_factory=lambda: defaultdict(float))
    cpu_per_file: dict[str, float] = field(default_factory=lambda: defaultdict(float))
    counts: dict[str, int] = field(default_factory=lambda: defaultdict(int))
    tests: list[tuple[float, str]] = field(default_factory=list)
    timeline: list[tuple[str, str, float, float]] = field(default_factory=list)  # (worker, file, seconds, ended_at)
    outcomes: dict[str, int] = field(default_factory=lambda: {"passed": 0, "failed": 0, "error": 0, "skipped": 0})
    wall: float = 0.0


def read_report(path: Path) -> Report:
    root = ET.parse(path).getroot()
    suites = [root] if root.tag == "testsuite" else list(root.iter("testsuite"))
    report = Report()
    for case in root.iter("testcase"):
        seconds = float(case.get("time") or 0)
        path_of_file = file_of(case.get("classname") or "")
        report.per_file[path_of_file] += seconds
        report.cpu_per_file[path_of_file] += cpu_seconds_of(case)
        report.counts[path_of_file] += 1
        report.tests.append((seconds, f"{path_of_file}::{case.get('name')}"))
        if (worker := property_of(case, "worker")) and (ended := property_of(case, "ended_at")):
            report.timeline.append((worker, path_of_file, seconds, float(ended)))
        kinds = {child.tag for child in case}
        outcome = next((k for k in ("failure", "error", "skipped") if k in kinds), "passed")
        report.outcomes["failed" if outcome == "failure" else outcome] += 1
    report.wall = max(float(s.get("time") or 0) for s in suites)
    return report


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("report", nargs="?", default="test-artifacts/junit.xml")
    parser.add_argument("--files", type=int, default=25)
    parser.add_argument("--tests", type=int, default=15)
    args = parser.parse_args()
    report = read_report(Path(args.report))
    per_file, cpu_per_file, counts, tests = report.per_file, report.cpu_per_file, report.counts, report.tests
    timeline, outcomes, wall = report.timeline, report.outcomes, report.wall
    busy = sum(per_file.values())
    print(f"{sum(counts.values())} tests in {len(per_file)} files: {outcomes}; wall {wall / 60:.1f} min, "
          f"test time summed over workers {busy / 60:.1f} min ({busy / wall:.2f} workers busy on average); "
          f"CPU of the workers and their reaped subprocesses {sum(cpu_per_file.values()) / 60:.1f} min\n")
    print("| file | tests | time | CPU |\n|---|---|---|---|")
    ranked = sorted(per_file.items(), key=lambda item: -item[1])
    for path, seconds in ranked[:args.files]:
        print(f"| `{path}` | {counts[path]} | {seconds:.0f} s | {cpu_per_file[path]:.0f} s |")
    rest = ranked[args.files:]
    if rest:
        print(f"| the other {len(rest)} files | {sum(counts[p] for p, _ in rest)} | {sum(s for _, s in rest):.0f} s "
              f"| {sum(cpu_per_file[p] for p, _ in rest):.0f} s |")
    if rows := worker_timelines(timeline):
        print("\n| worker | busy | ended (after the first test began) | files | its last file |\n|---|---|---|---|---|")
        for worker, busy_seconds, ended, last_file, files in rows:
            print(f"| {worker} | {busy_seconds:.0f} s | {ended:.0f} s | {files} | `{last_file}` |")
    print("\n| slowest tests | time |\n|---|---|")
    for seconds, name in sorted(tests, reverse=True)[:args.tests]:
        print(f"| `{name}` | {seconds:.0f} s |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
