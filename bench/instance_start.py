"""What a new Dagster instance costs before its first storage call answers, by hand (BENCHMARKS.md "Daemon storage").

    .venv/bin/python bench/instance_start.py [--instances 40] [--rounds 5]

Every sensor evaluation in a code server, every run worker and every `dagster` command builds a new instance from the
deployment's dagster.yaml, and its storages open their own connections (dagster-postgres' NullPool). An embedded
Postgres holds one migrated Dagster storage database; each round builds `--instances` instances from a dagster.yaml
naming, in turn, dagster-postgres' own storage (each of its three storages inspects the database for its tables, on
a connection of its own) and the shipped storage (orchestration_core/pooled_storage.py: one query finds every table
present, and the storages are told not to look again), interleaved, and makes one run query on each. Read: the whole
host's CPU (/proc/stat: the client and the Postgres backends both), this process's own CPU, the wall time and the new
Postgres sessions (pg_stat_database.sessions), per instance. Medians of the rounds, side by side in one run.
"""

from __future__ import annotations

import argparse
import os
import resource
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import dagster as dg  # noqa: E402
import sqlalchemy as sa  # noqa: E402
import yaml  # noqa: E402

from bench.storage_pool import host_busy_seconds, medians_of, sessions  # noqa: E402
from local_stack.embedded_postgres import ensure_database, psycopg2_url, temporary_embedded_postgres  # noqa: E402
from orchestration_core.pooled_storage import KEEP_CONNECTIONS_VARIABLE  # noqa: E402

STORAGES = {
    "dagster-postgres (tables inspected by each storage)": ("dagster_postgres", "DagsterPostgresStorage"),
    "shipped (one query, then no inspection)": ("orchestration_core.pooled_storage", "PooledPostgresStorage"),
}


def own_cpu_seconds() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def write_instance_yaml(home: Path, module: str, class_name: str, url: str) -> None:
    config = {"storage": {"custom": {"module": module, "class": class_name, "config": {"postgres_url": url}}},
              "telemetry": {"enabled": False}}
    (home / "dagster.yaml").write_text(yaml.safe_dump(config))


def measure(home: Path, admin: sa.Engine, database: str, instances: int) -> dict[str, float]:
    before_sessions, before_host, before_own = sessions(admin, database), host_busy_seconds(), own_cpu_seconds()
    started = time.perf_counter()
    for _ in range(instances):
        with dg.DagsterInstance.from_config(str(home)) as instance:
            instance.get_runs(limit=1)
    wall = time.perf_counter() - started
    return {"host_ms": 1000 * (host_busy_seconds() - before_host) / instances,
            "own_ms": 1000 * (own_cpu_seconds() - before_own) / instances,
            "wall_ms": 1000 * wall / instances,
            "sessions": (sessions(admin, database) - before_sessions) / instances}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--instances", type=int, default=40)
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    os.environ.pop(KEEP_CONNECTIONS_VARIABLE, None)  # as a code server and a run worker in production run
    with temporary_embedded_postgres("bench-instance-start-") as server, \
            tempfile.TemporaryDirectory(prefix="bench-instance-start-") as home_dir:
        home = Path(home_dir)
        admin_url = psycopg2_url(server.get_uri())
        url = ensure_database(admin_url, "dagster_bench")
        admin = sa.create_engine(admin_url, poolclass=sa.pool.NullPool)
        write_instance_yaml(home, *STORAGES["dagster-postgres (tables inspected by each storage)"], url)
        with dg.DagsterInstance.from_config(str(home)) as instance:  # creates the tables, as `migrate` does
            instance.get_runs(limit=1)
        results: dict[str, list[dict[str, float]]] = {label: [] for label in STORAGES}
        for _ in range(args.rounds):
            for label, (module, class_name) in STORAGES.items():
                write_instance_yaml(home, module, class_name, url)
                measure(home, admin, "dagster_bench", 3)  # warm: this storage's modules imported
                results[label].append(measure(home, admin, "dagster_bench", args.instances))
        admin.dispose()
    print(f"{args.instances} new instances and a run query each per round, {args.rounds} rounds, medians "
          f"({os.cpu_count()} CPUs; host CPU = this process + the Postgres backends)\n")
    print("| storage | host CPU ms | own CPU ms | wall ms | new sessions |")
    print("|---|---|---|---|---|")
    medians = medians_of(results)
    for label, m in medians.items():
        print(f"| {label} | {m['host_ms']:.1f} | {m['own_ms']:.1f} | {m['wall_ms']:.1f} | {m['sessions']:.1f} |")
    before, after = (medians[label] for label in STORAGES)
    print(f"\nshipped / dagster-postgres: host CPU {after['host_ms'] / before['host_ms']:.2f}x, "
          f"wall {after['wall_ms'] / before['wall_ms']:.2f}x, sessions {after['sessions'] / before['sessions']:.2f}x")


if __name__ == "__main__":
    main()
