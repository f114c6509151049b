"""What loading a code location costs each process that does it, by hand (BENCHMARKS.md "Process start-up").

    .venv/bin/python bench/startup_imports.py [--runs 7]

Every racing or maintenance process imports its code location's definitions before doing anything: the code
servers, each run's container (the Docker launcher starts one per run), every `dagster`/`racing` command and the
daemon's sensor evaluations through the code server. This starts a fresh interpreter per sample and reads its CPU
time (user + system) for: bare `import dagster`; each location's definitions; and the racing location with pandas
imported first, as it was loaded before pandas moved into the one asset that uses it, and the same for pyarrow (the
export asset's), and with Alembic imported first, as every racing process loaded it before the schema check read the
version table with plain SQL. Medians, side by side in one run, so the ratio holds on a loaded host.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import time

CASES = {
    "import dagster": "import dagster",
    "racing definitions": "import racing_orchestration.definitions",
    "racing definitions, pandas loaded too (before)": "import pandas; import racing_orchestration.definitions",
    "racing definitions, pyarrow loaded too (before)":
        "import pyarrow.parquet; import racing_orchestration.definitions",
    "racing definitions, alembic loaded too (before)":
        "import alembic.command, alembic.script, alembic.runtime.migration; import racing_orchestration.definitions",
    "maintenance definitions": "import maintenance_jobs.definitions",
    "control API app": "import control_api.app",
}


def sample(code: str) -> tuple[float, float]:
    """(CPU seconds, wall seconds) of a fresh interpreter running `code`."""
    before = os.times()
    started = time.monotonic()
    subprocess.run([sys.executable, "-W", "ignore", "-c", code], check=True, capture_output=True)
    wall = time.monotonic() - started
    after = os.times()
    return (after.children_user - before.children_user) + (after.children_system - before.children_system), wall


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=7)
    args = parser.parse_args()
    results: dict[str, list[tuple[float, float]]] = {name: [] for name in CASES}
    for _ in range(args.runs):  # interleaved: each round samples every case under the same load
        for name, code in CASES.items():
            results[name].append(sample(code))
    print(f"{args.runs} runs each, Python {sys.version.split()[0]}, {os.cpu_count()} cores, "
          f"load average {os.getloadavg()[0]:.1f}\n")
    print("| process loads | CPU median | wall median |\n|---|---|---|")
    for name, samples in results.items():
        print(f"| {name} | {statistics.median(c for c, _ in samples):.2f} s "
              f"| {statistics.median(w for _, w in samples):.2f} s |")
    now = statistics.median(c for c, _ in results["racing definitions"])
    before = statistics.median(c for c, _ in results["racing definitions, pandas loaded too (before)"])
    print(f"\nracing location start-up CPU: {now:.2f} s now vs {before:.2f} s with pandas "
          f"({before - now:.2f} s, {1 - now / before:.0%} less per process)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
