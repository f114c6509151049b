"""Benchmark: one `maintenance_dispatcher` tick with 10k tasks in the registry (goal: median <= 100 ms).

The registry lives in embedded Postgres (or `--database-url`). Tasks follow a homelab-like mix: 2% every minute,
10% hourly, 60% daily, 20% weekly, 8% monthly, random minutes/hours/priorities. Each timed tick is the real
`dispatch_tick` (SQL prefilter + croniter per distinct schedule + RunRequest building) for consecutive minutes, the
way the sensor runs. Side by side, the naive evaluator the prefilter replaces: load every enabled row and run croniter
per task. Also timed: a 60-minute catch-up tick (after downtime).

    .venv/bin/python bench/dispatcher_tick.py [--tasks 10000] [--ticks 30]
"""

from __future__ import annotations

import argparse
import datetime as dt
import random
import statistics
import sys
import tempfile
import time
from pathlib import Path

import sqlalchemy as sa

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from local_stack.embedded_postgres import drop_database, ensure_database, psycopg2_url, start_embedded_postgres  # noqa: E402
from maintenance_jobs.database.migrate import upgrade  # noqa: E402
from maintenance_jobs.database.tables import scheduled_tasks  # noqa: E402
from maintenance_jobs.models import Task  # noqa: E402
from maintenance_jobs.resources import MaintenanceRegistryResource  # noqa: E402
from maintenance_jobs.schedule import due_minutes, plan_window, wall_clock_slots  # noqa: E402
from maintenance_jobs.seed import seed_registry  # noqa: E402
from maintenance_jobs.sensors import dispatch_tick  # noqa: E402

TIMEZONE = "Pacific/Auckland"
START = dt.datetime(2025, 6, 10, 14, 0, tzinfo=dt.UTC)  # 02:00 NZST


def task_rows(count: int, rng: random.Random) -> list[dict]:
    rows = []
    for i in range(count):
        kind = rng.random()
        row = {"minute": -1, "hour": -1, "day_of_month": -1, "month": -1, "day_of_week": -1}
        if kind >= 0.02:
            row["minute"] = rng.randrange(60)
        if kind >= 0.12:
            row["hour"] = rng.randrange(24)
        if 0.72 <= kind < 0.92:
            row["day_of_week"] = rng.randrange(7)
        if kind >= 0.92:
            row["day_of_month"] = rng.randrange(1, 29)
        rows.append(
            {
                "task_name": f"bench_task_{i:05d}",
                "service": rng.choice(["scheduler", "media", "backup", "docs"]),
                "executor": "example_executor",
                "priority": rng.randrange(1, 101),
                "enabled": rng.random() > 0.05,
                "config": {"message": f"task {i}", "delay_seconds": 0},
                **row,
            }
        )
    return rows


def naive_tick(engine: sa.Engine, cursor: dt.datetime, now: dt.datetime) -> int:
    """Every enabled row through croniter, no prefilter, no grouping (the baseline)."""
    window = plan_window(cursor, now, 60)
    slots = wall_clock_slots(window.minutes, TIMEZONE)
    with engine.connect() as conn:
        rows = conn.execute(sa.select(scheduled_tasks).where(scheduled_tasks.c.enabled.is_(True))).all()
    due = 0
    for row in rows:
        task = Task.model_validate(dict(row._mapping))
        due += len(due_minutes(task.cron_fields, slots))
    return due


def timed(fn, *args) -> tuple[float, object]:
    started = time.perf_counter()
    result = fn(*args)
    return (time.perf_counter() - started) * 1000, result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--tasks", type=int, default=10_000)
    parser.add_argument("--ticks", type=int, default=30)
    parser.add_argument("--naive-ticks", type=int, default=5)
    parser.add_argument("--database-url", help="Postgres server URL (default: an embedded server)")
    args = parser.parse_args()

    server = None
    if args.database_url:
        server_url = psycopg2_url(args.database_url)
    else:
        server = start_embedded_postgres(Path(tempfile.mkdtemp(prefix="bench-dispatch-")), delete_on_exit=True)
        server_url = psycopg2_url(server.get_uri())
    database = "maintenance_dispatch_bench"
    url = ensure_database(server_url, database)
    try:
        upgrade(url)
        engine = sa.create_engine(url)
        seed_registry(engine)
        rows = task_rows(args.tasks - 4, random.Random(42))
        with engine.begin() as conn:
            for i in range(0, len(rows), 2000):
                conn.execute(scheduled_tasks.insert(), rows[i : i + 2000])
            conn.execute(sa.text("ANALYZE scheduled_tasks"))
            total = conn.execute(sa.text("SELECT count(*) FROM scheduled_tasks")).scalar()
        registry = MaintenanceRegistryResource(database_url=url, timezone=TIMEZONE)
        dispatch_tick(registry, None, START - dt.timedelta(minutes=1))  # warm-up: migrations check, pool, imports

        tick_ms, due_counts = [], []
        cursor = (START - dt.timedelta(minutes=1)).isoformat()
        for i in range(args.ticks):
            now = START + dt.timedelta(minutes=i, seconds=7)
            ms, tick = timed(dispatch_tick, registry, cursor, now)
            cursor = tick.result.cursor
            tick_ms.append(ms)
            due_counts.append(len(tick.result.run_requests))

        naive_ms = []
        for i in range(args.naive_ticks):
            now = START + dt.timedelta(minutes=i, seconds=7)
            ms, due = timed(naive_tick, engine, now - dt.timedelta(minutes=1), now)
            naive_ms.append(ms)
            assert due == due_counts[i], f"naive evaluator disagrees at minute {i}: {due} != {due_counts[i]}"

        catchup_ms, catchup_due = [], 0
        for i in range(3):
            now = START + dt.timedelta(hours=2 + i, seconds=7)
            ms, tick = timed(dispatch_tick, registry, (now - dt.timedelta(minutes=60)).isoformat(), now)
            catchup_ms.append(ms)
            catchup_due = len(tick.result.run_requests)
        engine.dispose()

        median = statistics.median(tick_ms)
        naive = statistics.median(naive_ms)
        print(f"registry rows: {total}; ticks: {args.ticks}; due per tick: median {statistics.median(due_counts):.0f}, "
              f"max {max(due_counts)}")
        print(f"dispatch tick   median {median:7.1f} ms  p90 {sorted(tick_ms)[int(0.9 * len(tick_ms)) - 1]:7.1f} ms  "
              f"max {max(tick_ms):7.1f} ms  (goal <= 100 ms: {'met' if median <= 100 else 'NOT met'})")
        print(f"naive baseline  median {naive:7.1f} ms  ({naive / median:.0f}x the dispatcher)")
        print(f"60-min catch-up median {statistics.median(catchup_ms):7.1f} ms  ({catchup_due} run requests)")
    finally:
        drop_database(server_url, database)
        if server is not None:
            server.cleanup()


if __name__ == "__main__":
    main()
