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
from pathlib import Path


def file_of(classname: str) -> str:
    """`tests.control_api.test_x.TestY` -> tests/control_api/test_x.py (class names inside the module dropped)."""
    parts = classname.split(".")
    while parts and not parts[-1].startswith("test_") and len(parts) > 1:
        parts.pop()
    return "/".join(parts) + ".py"


def cpu_seconds_of(case: ET.Element) -> float:
    """A test case's `cpu_seconds` property (tests/conftest.py), 0 where a report has none."""
    for prop in case.iter("property"):
        if prop.get("name") == "cpu_seconds":
            return float(prop.get("value") or 0)
    return 0.0


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("report", nargs="?", default="test-artifacts/junit.xml")
    parser.add_argument("--files", type=int, default=25)
    parser.add_argument("--tests", type=int, default=15)
    args = parser.parse_args()
    root = ET.parse(Path(args.report)).getroot()
    suites = [root] if root.tag == "testsuite" else list(root.iter("testsuite"))
    per_file: dict[str, float] = defaultdict(float)
    cpu_per_file: dict[str, float] = defaultdict(float)
    counts: dict[str, int] = defaultdict(int)
    tests: list[tuple[float, str]] = []
    outcomes = {"passed": 0, "failed": 0, "error": 0, "skipped": 0}
    for case in root.iter("testcase"):
        seconds = float(case.get("time") or 0)
        path = file_of(case.get("classname") or "")
        per_file[path] += seconds
        cpu_per_file[path] += cpu_seconds_of(case)
        counts[path] += 1
        tests.append((seconds, f"{path}::{case.get('name')}"))
        kinds = {child.tag for child in case}
        outcome = next((k for k in ("failure", "error", "skipped") if k in kinds), "passed")
        outcomes["failed" if outcome == "failure" else outcome] += 1
    wall = max(float(s.get("time") or 0) for s in suites)
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
    print("\n| slowest tests | time |\n|---|---|")
    for seconds, name in sorted(tests, reverse=True)[:args.tests]:
        print(f"| `{name}` | {seconds:.0f} s |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
