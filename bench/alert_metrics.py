"""Benchmark: the cost of the alert rules' tick-state inputs on `/metrics` (and `/health`) as the tick table grows.
Run by hand:

    .venv/bin/python bench/alert_metrics.py [--ticks 100000 400000] [--repeats 20]

Ticks of every schedule and sensor of both code locations are written straight into the schedule storage of an
embedded Postgres (as many per instigator as its interval gives over the same span: the 15 s sensors get most), then
the newest ticks of all of them are read the two ways Dagster offers, side by side and alternating: one batch query
(`get_batch_ticks`, a window over each instigator's ticks, what control_api/schedulers.py uses) and one indexed query
per instigator (`get_ticks(limit=2)`). Reports medians and their ratio for each table size.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import dagster as dg  # noqa: E402
import sqlalchemy as sa  # noqa: E402
from dagster._core.scheduler.instigation import InstigatorType, TickData, TickStatus  # noqa: E402
from dagster._core.storage.schedules.schema import JobTickTable  # noqa: E402
from dagster_shared.serdes import serialize_value  # noqa: E402

from control_api.schedulers import TICK_HISTORY, load_definitions, nominal_interval, selector_id, tick_states  # noqa: E402
from local_stack.embedded_postgres import ensure_database, psycopg2_url, start_embedded_postgres  # noqa: E402

BATCH = 5000


def seed(instance: dg.DagsterInstance, total: int, now: float) -> None:
    items = load_definitions()
    import datetime as dt

    moment = dt.datetime.fromtimestamp(now, dt.UTC)
    rates = {selector_id(item): 1 / nominal_interval(item, moment) for item in items}
    per_second = sum(rates.values())
    span = total / per_second  # seconds of history that gives `total` ticks
    rows = []
    engine = instance.schedule_storage._engine  # noqa: SLF001 (bench only: bulk insert)
    for item in items:
        key = selector_id(item)
        count = max(1, int(span * rates[key]))
        interval = span / count
        kind = InstigatorType.SENSOR if item.kind == "sensor" else InstigatorType.SCHEDULE
        for i in range(count):
            stamp = now - span + i * interval
            status = TickStatus.FAILURE if i % 97 == 0 else TickStatus.SKIPPED
            body = TickData(instigator_origin_id=key, instigator_name=item.definition.name, instigator_type=kind,
                            status=status, timestamp=stamp, selector_id=key, consecutive_failure_count=0)
            rows.append({"job_origin_id": key, "selector_id": key, "status": status.value, "type": kind.value,
                         "timestamp": dt.datetime.fromtimestamp(stamp, dt.UTC).replace(tzinfo=None),
                         "tick_body": serialize_value(body)})
            if len(rows) >= BATCH:
                with engine.begin() as conn:
                    conn.execute(JobTickTable.insert(), rows)
                rows = []
    if rows:
        with engine.begin() as conn:
            conn.execute(JobTickTable.insert(), rows)
    with engine.begin() as conn:
        conn.execute(sa.text("ANALYZE job_ticks"))


def per_instigator(instance: dg.DagsterInstance) -> None:
    for item in load_definitions():
        key = selector_id(item)
        instance.get_ticks(key, key, limit=TICK_HISTORY)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--ticks", type=int, nargs="+", default=[100_000, 400_000])
    parser.add_argument("--repeats", type=int, default=20)
    args = parser.parse_args()
    server = start_embedded_postgres(Path(tempfile.mkdtemp(prefix="bench-pg-")) / "pgdata", delete_on_exit=True)
    try:
        url = ensure_database(psycopg2_url(server.get_uri()), "bench_alerts")
        with dg.instance_for_test(overrides={"storage": {"postgres": {"postgres_url": url}}}) as instance:
            load_definitions()
            print(f"{len(load_definitions())} schedules and sensors")
            seeded = 0
            for total in sorted(args.ticks):
                started = time.perf_counter()
                seed(instance, total - seeded, time.time())
                seeded = total
                print(f"\n{total} ticks in the table (seeded in {time.perf_counter() - started:.0f} s)")
                batch, single = [], []
                for _ in range(args.repeats):
                    t0 = time.perf_counter()
                    tick_states(instance)
                    batch.append((time.perf_counter() - t0) * 1000)
                    t0 = time.perf_counter()
                    per_instigator(instance)
                    single.append((time.perf_counter() - t0) * 1000)
                b, s = statistics.median(batch), statistics.median(single)
                print(f"  tick_states (batch query + states): median {b:.1f} ms (max {max(batch):.1f})")
                print(f"  one get_ticks per instigator:        median {s:.1f} ms (max {max(single):.1f})")
                print(f"  ratio batch / per-instigator: {b / s:.2f}")
    finally:
        server.cleanup()


if __name__ == "__main__":
    main()
