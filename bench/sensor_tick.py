"""Benchmark: checkpoint sensor tick cost with 100k races in Postgres (embedded). Run by hand:

    .venv/bin/python bench/sensor_tick.py [--races 100000] [--ticks 200]

Races are spread over ~250 days around now (400 a day, like a busy NZ+AUS card); every checkpoint due before the
first tick is already in the ledger (the steady state). Each tick moves the sensors' clock 15 s, so races fall due
during the run and get claimed, as in production. Reports the median / p95 of a full sensor evaluation (a fresh
`build_sensor_context` with the race_db resource, as the daemon does per tick) and of the database part alone.
"""

from __future__ import annotations

import argparse
import datetime as dt
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import dagster as dg  # noqa: E402
import sqlalchemy as sa  # noqa: E402

from local_stack.embedded_postgres import ensure_database, psycopg2_url, start_embedded_postgres  # noqa: E402
from racing_orchestration.checkpoints import sensors  # noqa: E402
from racing_orchestration.checkpoints.due import plan_tick  # noqa: E402
from racing_orchestration.checkpoints.windows import CHECKPOINTS  # noqa: E402
from racing_orchestration.race_db import upgrade  # noqa: E402
from racing_orchestration.race_db.resource import RaceDatabase  # noqa: E402

SEED_SQL = """
INSERT INTO meetings (meeting_id, name, meeting_date, category, country)
SELECT 'm' || g, 'Bench Park ' || g, (:first_day)::date + (g / 40), 'T', 'NZ' FROM generate_series(0, :meetings - 1) g;
INSERT INTO races (race_id, meeting_id, race_number, name, start_time, status)
SELECT 'r' || g, 'm' || (g / 10), g % 10 + 1, 'Bench race ' || g,
       (:first_day)::timestamptz + make_interval(days => g / 400, mins => 600 + (g % 400) * 2 + (g % 7)), 'Open'
FROM generate_series(0, :races - 1) g;
INSERT INTO race_checkpoints (race_id, checkpoint, scheduled_for, state)
SELECT r.race_id, c.name, r.start_time + c.offset_, 'done'
FROM races r CROSS JOIN (VALUES ('t60', interval '-60 min'), ('t15', interval '-15 min'), ('post', interval '5 min'))
     AS c(name, offset_)
WHERE r.start_time + c.offset_ <= :now;
ANALYZE;
"""


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--races", type=int, default=100_000)
    parser.add_argument("--ticks", type=int, default=200)
    args = parser.parse_args()
    server = start_embedded_postgres(Path(tempfile.mkdtemp(prefix="bench-pg-")) / "pgdata", delete_on_exit=True)
    try:
        url = ensure_database(psycopg2_url(server.get_uri()), "bench_sensor")
        upgrade(url)
        now = dt.datetime.now(dt.UTC).replace(hour=15, minute=0, second=0, microsecond=0)  # mid-card (10:00-23:20 UTC)
        first_day = (now - dt.timedelta(days=args.races // 400 // 2)).date()
        engine = sa.create_engine(url)
        started = time.perf_counter()
        with engine.begin() as conn:
            for statement in filter(str.strip, SEED_SQL.split(";")):
                conn.execute(sa.text(statement), {"first_day": first_day.isoformat(), "meetings": args.races // 10 + 1,
                                                   "races": args.races, "now": now})
            counts = conn.execute(sa.text("SELECT (SELECT count(*) FROM races), (SELECT count(*) FROM race_checkpoints)")).one()
        print(f"seeded {counts[0]} races, {counts[1]} ledger rows in {time.perf_counter() - started:.1f} s")
        race_db = RaceDatabase(url=url)
        clock = {"now": now}
        sensors.sensor_now = lambda: clock["now"]
        full: list[float] = []
        db_only: list[float] = []
        requested = 0
        with dg.instance_for_test() as instance:
            for tick in range(args.ticks):
                clock["now"] = now + dt.timedelta(seconds=15 * tick)
                for name, sensor in sensors.CHECKPOINT_SENSORS.items():
                    t0 = time.perf_counter()
                    with dg.build_sensor_context(instance=instance, resources={"race_db": race_db}) as context:
                        result = sensor(context)
                    full.append((time.perf_counter() - t0) * 1000)
                    requested += len(getattr(result, "run_requests", None) or [])
                    t0 = time.perf_counter()
                    with sensors.sensor_engine(race_db).begin() as conn:
                        plan_tick(conn, CHECKPOINTS[name], clock["now"])
                    db_only.append((time.perf_counter() - t0) * 1000)
            with sensors.sensor_engine(race_db).connect() as conn:
                plan = conn.execute(sa.text(
                    "EXPLAIN SELECT race_id FROM races WHERE start_time > now() - interval '1 day' AND start_time <= now() "
                    "AND NOT EXISTS (SELECT 1 FROM race_checkpoints c WHERE c.race_id = races.race_id AND c.checkpoint = 't60') "
                    "ORDER BY start_time LIMIT 200")).scalars().all()
        print(f"{args.ticks} ticks x 3 sensors over {args.ticks * 15 / 60:.0f} simulated minutes, {requested} runs requested")
        print(f"full sensor evaluation: median {statistics.median(full):.1f} ms, p95 {percentile(full, 0.95):.1f} ms, "
              f"max {max(full):.1f} ms")
        print(f"database part (query + claims): median {statistics.median(db_only):.1f} ms, "
              f"p95 {percentile(db_only, 0.95):.1f} ms")
        print("plan:", " | ".join(line.strip() for line in plan if "Index" in line or "Scan" in line))
    finally:
        server.cleanup()


if __name__ == "__main__":
    main()
