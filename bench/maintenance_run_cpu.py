"""What one maintenance run costs, by executor, by hand (BENCHMARKS.md "Maintenance run").

    .venv/bin/python bench/maintenance_run_cpu.py [--runs 7]

Every maintenance job is one op. Under Dagster's default executor (multiprocess) the run worker, itself a process
that loaded the maintenance location, starts a second process for that one step, which loads Dagster and the location
again; the location's `in_process_executor` runs the step in the run worker. This runs the shipped example_executor
job (`dagster job execute`, a persistent SQLite instance in a temporary DAGSTER_HOME) and the same job under the
multiprocess executor (the "before"), interleaved, and reads each command's CPU time (user + system, its step process
included) and wall time. Medians, side by side in one run, so the ratio holds on a loaded host.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parent.parent
DAGSTER = Path(sys.executable).with_name("dagster")
CONFIG = """ops:
  run_example_executor:
    config: {message: benchmark, delay_seconds: 0}
"""
# The same jobs, wired as Dagster wires them by default (what the location did before it named its executor).
MULTIPROCESS_DEFINITIONS = """import dagster as dg
import maintenance_jobs.definitions as shipped
from maintenance_jobs.jobs import example_executor_job

defs = dg.Definitions(jobs=[example_executor_job], executor=dg.multiprocess_executor, resources=shipped.defs.resources)
"""


def sample(target: list[str], home: Path, config: Path) -> tuple[float, float]:
    """(CPU seconds, wall seconds) of one `dagster job execute` of example_executor."""
    before = os.times()
    started = time.monotonic()
    subprocess.run([str(DAGSTER), "job", "execute", *target, "-j", "example_executor", "-c", str(config)],
                   check=True, capture_output=True, cwd=REPO_ROOT,
                   env={**os.environ, "DAGSTER_HOME": str(home), "PYTHONWARNINGS": "ignore"})
    wall = time.monotonic() - started
    after = os.times()
    return (after.children_user - before.children_user) + (after.children_system - before.children_system), wall


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=7)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="maintenance-run-bench-") as scratch:
        folder = Path(scratch)
        (folder / "home").mkdir()
        (folder / "home" / "dagster.yaml").write_text("telemetry:\n  enabled: false\n")
        (folder / "run.yaml").write_text(CONFIG)
        (folder / "multiprocess_defs.py").write_text(MULTIPROCESS_DEFINITIONS)
        cases = {"in-process (shipped)": ["-m", "maintenance_jobs.definitions"],
                 "multiprocess (Dagster's default, before)": ["-f", str(folder / "multiprocess_defs.py")]}
        results: dict[str, list[tuple[float, float]]] = {name: [] for name in cases}
        for _ in range(args.runs):
            for name, target in cases.items():  # interleaved: a load change hits both alike
                results[name].append(sample(target, folder / "home", folder / "run.yaml"))
    print(f"{args.runs} runs each, medians; Python {sys.version.split()[0]}, {os.cpu_count()} cores")
    print("| executor | CPU per run | wall per run |")
    print("|---|---|---|")
    for name, samples in results.items():
        cpu = statistics.median(s[0] for s in samples)
        wall = statistics.median(s[1] for s in samples)
        print(f"| {name} | {cpu:.2f} s | {wall:.2f} s |")
    shipped, before = (statistics.median(s[0] for s in results[name]) for name in cases)
    print(f"CPU ratio (before / shipped): {before / shipped:.2f}x")


if __name__ == "__main__":
    main()
