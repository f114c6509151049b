"""Benchmark: one code-server healthcheck, `dagster api grpc-health-check` against the probe that replaced it
(`python -m orchestration_core.code_server_probe`), side by side on one real code server.

Starts the production command of a code server (`dagster code-server start -m maintenance_jobs.definitions`) on a free
port, then runs the two checks alternately, `--rounds` times each, as the container healthcheck runs them: a new
Python process per check. For each it reports the median and worst wall time, the median CPU time (user + system of
the check process) and the peak resident memory, plus the CPU a code server's container spends on healthchecks per
hour at docker-compose.yml's 15 s interval. `--burners N` runs N busy-loop processes meanwhile, a loaded host's
stand-in (the healthcheck's 10 s timeout is what a loaded host exceeded).

    .venv/bin/python bench/healthcheck_probe.py [--rounds 15] [--burners 0]
"""

from __future__ import annotations

import argparse
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from tests.code_server import running_code_server  # noqa: E402

INTERVAL_SECONDS = 15  # docker-compose.yml, code-racing and code-maintenance


def checks(port: int) -> dict[str, list[str]]:
    bin_dir = Path(sys.executable).parent
    return {
        "dagster api grpc-health-check": [str(bin_dir / "dagster"), "api", "grpc-health-check", "-p", str(port)],
        "code_server_probe": [sys.executable, "-m", "orchestration_core.code_server_probe", str(port)],
    }


def run_once(command: list[str]) -> tuple[float, float, float]:
    """(wall s, CPU s, peak RSS MiB) of one check process, measured by GNU time (a child of this large process would
    report this process's pages as its own peak); the check must pass."""
    with tempfile.NamedTemporaryFile("r") as report:
        started = time.perf_counter()
        done = subprocess.run(["/usr/bin/time", "-f", "%U %S %M", "-o", report.name, *command], cwd=REPO,
                              stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        wall = time.perf_counter() - started
        assert done.returncode == 0, (command, done.stderr[-500:])
        user, system, rss_kib = report.read().split()[-3:]
    return wall, float(user) + float(system), int(rss_kib) / 1024


def burner() -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-c", "while True: pass"])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=15)
    parser.add_argument("--burners", type=int, default=0)
    args = parser.parse_args()
    print(f"machine: {platform.node()}, {os.cpu_count()} cores, Python {platform.python_version()}; "
          f"{args.rounds} rounds, {args.burners} busy-loop processes beside")
    burners = [burner() for _ in range(args.burners)]
    try:
        with running_code_server() as (_, port):
            commands = checks(port)
            results: dict[str, list[tuple[float, float, float]]] = {name: [] for name in commands}
            for _ in range(args.rounds):
                for name, command in commands.items():  # alternating: a change in load lands on both
                    results[name].append(run_once(command))
    finally:
        for process in burners:
            process.kill()
    print("\n| check | median wall | worst wall | median CPU | peak RSS | CPU per hour (every 15 s) |")
    print("|---|---|---|---|---|---|")
    for name, samples in results.items():
        walls, cpus, rss = zip(*samples, strict=True)
        per_hour = statistics.median(cpus) * 3600 / INTERVAL_SECONDS
        print(f"| `{name}` | {statistics.median(walls):.2f} s | {max(walls):.2f} s | {statistics.median(cpus):.2f} s | "
              f"{max(rss):.0f} MiB | {per_hour:.0f} s |")
    old, new = (statistics.median(c for _, c, _ in results[name]) for name in commands)
    print(f"\nCPU ratio old/new: {old / new:.1f}x")


if __name__ == "__main__":
    main()
