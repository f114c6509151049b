"""What the daemon's storage calls cost with and without a connection pool, by hand (BENCHMARKS.md "Daemon storage").

    .venv/bin/python bench/storage_pool.py [--calls 400] [--rounds 5] [--threads 4]

An embedded Postgres and one Dagster storage database; the instance is built from the same `storage: custom:` block
as dagster.yaml (orchestration_core/pooled_storage.py), once without DAGSTER_STORAGE_KEEP_CONNECTIONS (dagster-postgres'
NullPool: a new connection per call, as run workers keep) and once with it set to 1 (the daemon's setting: one kept
connection per storage, Dagster's `optimize_for_webserver`). Each round makes the same mix of reads and writes the
daemon's loops make (queued-run and in-progress queries, instigator state, a tick created and updated, a cursor
written) `--calls` times in each mode, interleaved, from one thread and split over `--threads` threads at once (the
daemon's loops overlap), and reads the whole host's CPU (/proc/stat: the client and the Postgres backends both), the
wall time and the new Postgres sessions (pg_stat_database.sessions). Medians of the rounds, side by side in one run.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import dagster as dg  # noqa: E402
import sqlalchemy as sa  # noqa: E402

from local_stack.embedded_postgres import ensure_database, psycopg2_url, temporary_embedded_postgres  # noqa: E402
from orchestration_core.pooled_storage import KEEP_CONNECTIONS_VARIABLE  # noqa: E402


def host_busy_seconds() -> float:
    with open("/proc/stat") as stat:
        fields = [int(v) for v in stat.readline().split()[1:]]
    return (sum(fields) - fields[3] - fields[4]) / os.sysconf("SC_CLK_TCK")


def sessions(admin: sa.Engine, database: str) -> int:
    with admin.connect() as conn:
        return int(conn.execute(sa.text("SELECT sessions FROM pg_stat_database WHERE datname = :d"),
                                {"d": database}).scalar_one())


def started_tick(now: float):
    """A sensor's STARTED tick (TickData, which has no public import), read from Dagster's serialized form: the
    storage names of its fields (job_origin_id, job_name, job_type) are what job_ticks.tick_body holds."""
    return dg.deserialize_value(json.dumps({
        "__class__": "TickData", "job_origin_id": "bench", "job_name": "bench_sensor", "selector_id": "bench",
        "job_type": {"__enum__": "InstigatorType.SENSOR"}, "status": {"__enum__": "TickStatus.STARTED"},
        "timestamp": now}))


def daemon_like_calls(instance: dg.DagsterInstance, calls: int) -> None:
    """The storage calls of the daemon's loops, in turn."""
    for i in range(calls):
        match i % 6:
            case 0:
                instance.get_run_records(dg.RunsFilter(statuses=[dg.DagsterRunStatus.QUEUED]), limit=25)
            case 1:
                instance.get_run_records(dg.RunsFilter(statuses=[dg.DagsterRunStatus.STARTED]), limit=25)
            case 2:
                instance.all_instigator_state()
            case 3:
                tick = instance.create_tick(started_tick(time.time()))
                instance.update_tick(tick.with_status(type(tick.status).SKIPPED))  # TickStatus, from the tick
            case 4:
                instance.daemon_cursor_storage.set_cursor_values({"bench": str(i)})
            case 5:
                instance.get_runs(limit=10)


def medians_of(results: dict[str, list[dict[str, float]]]) -> dict[str, dict[str, float]]:
    """Each mode's median of every figure over the rounds."""
    return {label: {key: statistics.median(row[key] for row in rows) for key in rows[0]}
            for label, rows in results.items()}


def measure(url: str, admin: sa.Engine, database: str, keep: bool, calls: int, threads: int) -> dict[str, float]:
    os.environ[KEEP_CONNECTIONS_VARIABLE] = "1" if keep else ""
    overrides = {"storage": {"custom": {"module": "orchestration_core.pooled_storage", "class": "PooledPostgresStorage",
                                        "config": {"postgres_url": url}}}}
    with dg.instance_for_test(overrides=overrides) as instance:
        daemon_like_calls(instance, 12)  # warm: tables checked, first connections made
        before_sessions, before_cpu, started = sessions(admin, database), host_busy_seconds(), time.perf_counter()
        workers = [threading.Thread(target=daemon_like_calls, args=(instance, calls // threads))
                   for _ in range(threads)]
        for worker in workers:
            worker.start()
        for worker in workers:
            worker.join()
        wall = time.perf_counter() - started
        cpu = host_busy_seconds() - before_cpu
        new_sessions = sessions(admin, database) - before_sessions
    return {"wall_ms_per_call": 1000 * wall / calls, "cpu_ms_per_call": 1000 * cpu / calls,
            "sessions_per_call": new_sessions / calls}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=400)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--threads", type=int, default=4)
    args = parser.parse_args()
    with temporary_embedded_postgres("bench-storage-pool-") as server:
        admin_url = psycopg2_url(server.get_uri())
        url = ensure_database(admin_url, "dagster_bench")
        admin = sa.create_engine(admin_url, poolclass=sa.pool.NullPool)
        modes = [(f"{storage}, {threads} thread{'s' if threads > 1 else ''}", keep, threads)
                 for threads in (1, args.threads)
                 for storage, keep in (("NullPool (run workers)", False), ("kept connections (daemon)", True))]
        results: dict[str, list[dict[str, float]]] = {label: [] for label, _, _ in modes}
        for _ in range(args.rounds):
            for label, keep, threads in modes:
                results[label].append(measure(url, admin, "dagster_bench", keep, args.calls, threads))
    print(f"{args.calls} daemon-like storage calls per round, {args.rounds} rounds, medians "
          f"({os.cpu_count()} CPUs; host CPU = client + Postgres backends)\n")
    print("| storage | wall ms/call | host CPU ms/call | new sessions/call |")
    print("|---|---|---|---|")
    medians = medians_of(results)
    for label, m in medians.items():
        print(f"| {label} | {m['wall_ms_per_call']:.2f} | {m['cpu_ms_per_call']:.2f} | {m['sessions_per_call']:.2f} |")
    print()
    for threads in (1, args.threads):
        before = medians[modes[0 if threads == 1 else 2][0]]
        after = medians[modes[1 if threads == 1 else 3][0]]
        print(f"{threads} thread(s): CPU per call {before['cpu_ms_per_call'] / after['cpu_ms_per_call']:.1f}x less "
              f"with kept connections; wall {before['wall_ms_per_call'] / after['wall_ms_per_call']:.1f}x")


if __name__ == "__main__":
    main()
