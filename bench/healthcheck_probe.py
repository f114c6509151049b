"""Benchmark: the container healthchecks Dagster ships against the probes that replaced them, side by side.

- Code servers: `dagster api grpc-health-check` against `python -m orchestration_core.code_server_probe`, on the
  production command of a code server (`dagster code-server start -m maintenance_jobs.definitions`) on a free port.
- Daemon: `dagster-daemon liveness-check` (with deploy/dagster.yaml as its instance) against
  `python orchestration_core/daemon_probe.py` (as deploy/Dockerfile.dagster runs it), on an embedded Postgres whose
  run storage holds a fresh heartbeat of every required daemon.

The checks run alternately, `--rounds` times each, as the container healthcheck runs them: a new Python process per
check. For each it reports the median and worst wall time, the median CPU time (user + system of the check process)
and the peak resident memory, plus the CPU a container spends on healthchecks per hour at docker-compose.yml's interval
(15 s code servers, 30 s daemon). `--burners N` runs N busy-loop processes meanwhile, a loaded host's stand-in (the
healthchecks' timeouts are what a loaded host exceeded).

    .venv/bin/python bench/healthcheck_probe.py [--rounds 15] [--burners 0]
"""

from __future__ import annotations

import argparse
import os
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from tests.code_server import running_code_server  # noqa: E402

INTERVAL_SECONDS = {"code server": 15, "daemon": 30}  # docker-compose.yml


def code_server_checks(port: int) -> dict[str, list[str]]:
    bin_dir = Path(sys.executable).parent
    return {
        "dagster api grpc-health-check": [str(bin_dir / "dagster"), "api", "grpc-health-check", "-p", str(port)],
        "code_server_probe": [sys.executable, "-m", "orchestration_core.code_server_probe", str(port)],
    }


def daemon_checks(daemon_types: list[str]) -> dict[str, list[str]]:
    bin_dir = Path(sys.executable).parent
    return {
        "dagster-daemon liveness-check": [str(bin_dir / "dagster-daemon"), "liveness-check"],
        "daemon_probe": [sys.executable, str(REPO / "orchestration_core" / "daemon_probe.py"), "180", *daemon_types],
    }


@contextmanager
def beating_instance() -> Iterator[list[str]]:
    """An embedded Postgres with deploy/dagster.yaml's instance in DAGSTER_HOME (and DAGSTER_POSTGRES_URL set, as in
    the daemon's container), every required daemon having just beaten; yields the required daemon types."""
    import dagster as dg
    from dagster._daemon.types import DaemonHeartbeat

    from local_stack.embedded_postgres import ensure_database, psycopg2_url, temporary_embedded_postgres

    with temporary_embedded_postgres("bench-healthcheck-") as server, tempfile.TemporaryDirectory() as home:
        shutil.copy(REPO / "deploy" / "dagster.yaml", Path(home) / "dagster.yaml")
        os.environ["DAGSTER_HOME"] = home
        os.environ["DAGSTER_POSTGRES_URL"] = ensure_database(psycopg2_url(server.get_uri()), "bench_healthcheck")
        with dg.DagsterInstance.get() as instance:
            required = list(instance.get_required_daemon_types())
            for daemon in required:  # the bench lasts minutes: written far enough ahead to stay fresh
                instance.add_daemon_heartbeat(DaemonHeartbeat(time.time() + 3600, daemon, None, None))
            yield required


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
    results: dict[str, dict[str, list[tuple[float, float, float]]]] = {}
    try:
        with running_code_server() as (_, port):
            results["code server"] = alternate(code_server_checks(port), args.rounds)
        with beating_instance() as daemon_types:
            results["daemon"] = alternate(daemon_checks(daemon_types), args.rounds)
    finally:
        for process in burners:
            process.kill()
    print("\n| container | check | median wall | worst wall | median CPU | peak RSS | healthcheck CPU per hour |")
    print("|---|---|---|---|---|---|---|")
    for container, by_check in results.items():
        for name, samples in by_check.items():
            walls, cpus, rss = zip(*samples, strict=True)
            per_hour = statistics.median(cpus) * 3600 / INTERVAL_SECONDS[container]
            print(f"| {container} | `{name}` | {statistics.median(walls):.2f} s | {max(walls):.2f} s | "
                  f"{statistics.median(cpus):.2f} s | {max(rss):.0f} MiB | {per_hour:.0f} s |")
    for container, by_check in results.items():
        old, new = (statistics.median(c for _, c, _ in samples) for samples in by_check.values())
        print(f"{container}: CPU ratio old/new {old / new:.1f}x")


def alternate(commands: dict[str, list[str]], rounds: int) -> dict[str, list[tuple[float, float, float]]]:
    """Each command `rounds` times, alternating, so a change in load lands on both."""
    results: dict[str, list[tuple[float, float, float]]] = {name: [] for name in commands}
    for _ in range(rounds):
        for name, command in commands.items():
            results[name].append(run_once(command))
    return results

if __name__ == "__main__":
    main()
