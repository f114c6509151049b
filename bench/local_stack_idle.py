"""What an idle `make run` stack costs the host, its storage connections kept or opened per call, by hand
(BENCHMARKS.md "Daemon storage").

    .venv/bin/python bench/local_stack_idle.py [--rounds 2] [--settle 45] [--seconds 60]

Each round starts the local stack as `make run` does (its own embedded Postgres, the simulated feed, `dagster dev`
with its daemon, webserver and two code servers, the control API) once with DAGSTER_STORAGE_KEEP_CONNECTIONS=0
(dagster-postgres' own behaviour: a new connection for every storage call) and once with 1 (what the stack sets: one
kept connection per storage, orchestration_core/pooled_storage.py), in turn. Once the stack is up it waits `--settle`
seconds (the sensors' first evaluations, the code servers' start), then for `--seconds` reads the whole host's busy CPU
(/proc/stat: Dagster's processes and the Postgres backends both) and the new Postgres sessions
(pg_stat_database.sessions, every database). Nothing else should run on the host. Medians of the rounds, side by side.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import sqlalchemy as sa  # noqa: E402

from bench.storage_pool import host_busy_seconds  # noqa: E402
from local_stack.stack import LocalStack, StackOptions, free_port  # noqa: E402
from orchestration_core.pooled_storage import KEEP_CONNECTIONS_VARIABLE  # noqa: E402

MODES = {"per call (0)": "0", "kept (1)": "1"}


def sessions(dagster_url: str) -> int:
    """New sessions of the stack's server since it started, every database (the Dagster URL's server)."""
    engine = sa.create_engine(dagster_url, poolclass=sa.pool.NullPool)
    try:
        with engine.connect() as conn:
            return int(conn.execute(sa.text("SELECT sum(sessions) FROM pg_stat_database")).scalar_one())
    finally:
        engine.dispose()


def measure(keep: str, settle: float, seconds: float) -> dict[str, float]:
    data_dir = Path(tempfile.mkdtemp(prefix="bench-local-stack-"))
    stack = LocalStack(StackOptions(data_dir=data_dir, dagster_port=free_port(), sim_port=free_port(),
                                    api_port=free_port(), extra_env={KEEP_CONNECTIONS_VARIABLE: keep}))
    try:
        stack.start()
        time.sleep(settle)
        url = stack.env["DAGSTER_POSTGRES_URL"]
        sessions_before, busy_before, started = sessions(url), host_busy_seconds(), time.monotonic()
        time.sleep(seconds)
        busy, elapsed = host_busy_seconds() - busy_before, time.monotonic() - started
        new_sessions = sessions(url) - sessions_before - 1  # less the reading's own
        return {"cpu_share": busy / elapsed, "sessions_per_second": new_sessions / elapsed}
    finally:
        stack.stop()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--settle", type=float, default=45.0)
    parser.add_argument("--seconds", type=float, default=60.0)
    args = parser.parse_args(argv)
    results: dict[str, list[dict[str, float]]] = {mode: [] for mode in MODES}
    for round_number in range(1, args.rounds + 1):
        for mode, keep in MODES.items():
            figures = measure(keep, args.settle, args.seconds)
            results[mode].append(figures)
            print(f"round {round_number} {mode}: {figures['cpu_share']:.3f} CPU-s/s, "
                  f"{figures['sessions_per_second']:.1f} new sessions/s", flush=True)
    medians = {mode: {key: statistics.median(r[key] for r in rows) for key in rows[0]} for mode, rows in results.items()}
    base = medians["per call (0)"]
    print(f"\nidle local stack, {args.seconds:.0f} s after {args.settle:.0f} s settling, median of {args.rounds} rounds")
    print("| storage connections | host CPU-s per s | new Postgres sessions per s | CPU ratio to per call |")
    print("|---|---|---|---|")
    for mode, figures in medians.items():
        print(f"| {mode} | {figures['cpu_share']:.3f} | {figures['sessions_per_second']:.1f} | "
              f"{figures['cpu_share'] / base['cpu_share']:.2f} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
