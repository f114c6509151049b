"""Benchmark: the cost of the alert rules' tick-state inputs on `/metrics` (and `/health`) as the tick table grows.
Run by hand:

    .venv/bin/python bench/alert_metrics.py [--ticks 100000 400000] [--repeats 20]

Ticks of every schedule and sensor of both code locations are written straight into the schedule storage of an
embedded Postgres (as many per instigator as its interval gives over the same span: the 15 s sensors get most), then
the newest ticks of all of them are read three ways, side by side and alternating: the control API's tick states
(one LATERAL query walking the (selector_id, timestamp) index per instigator, platform_monitoring/schedulers.py), Dagster's
`get_batch_ticks` (a window ranking every stored tick of them) and one Dagster `get_ticks(limit=2)` per instigator.
Reports medians and their ratio to the first, for each table size.
"""

from __future__ import annotations

import argparse
import functools
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import dagster as dg  # noqa: E402
import sqlalchemy as sa  # noqa: E402
from dagster_shared.error import SerializableErrorInfo  # noqa: E402
from dagster_shared.serdes import serialize_value  # noqa: E402

from orchestration_core.dagster_schema import job_ticks  # noqa: E402
from platform_monitoring.dagster_storage import newest_ticks  # noqa: E402
from platform_monitoring.schedulers import (  # noqa: E402
    TICK_HISTORY,
    nominal_interval,
    selector_id,
    tick_states,
)
from tests.control_api.job_policies import code_definitions  # noqa: E402

# Every schedule and sensor of both locations, read from their definitions once (the catalog the API asks the
# webserver for).
load_definitions = functools.cache(code_definitions)
from local_stack.embedded_postgres import ensure_database, psycopg2_url, start_embedded_postgres  # noqa: E402

BATCH = 5000


def tick_body(key: str, name: str, kind: str, status: str, stamp: float, failed: bool) -> str:
    """A finished tick's TickData as Dagster's serdes stores it (job_ticks.tick_body; the storage names of its fields:
    job_origin_id, job_name, job_type), for ticks written straight into the table. Dagster's own reads deserialize
    it, so a body it cannot read fails the bench's comparison with `get_batch_ticks`."""
    error = SerializableErrorInfo("bench failure", [], "Exception") if failed else None
    body = {"__class__": "TickData", "job_origin_id": key, "job_name": name,
            "job_type": {"__enum__": f"InstigatorType.{kind}"}, "status": {"__enum__": f"TickStatus.{status}"},
            "timestamp": stamp, "selector_id": key, "consecutive_failure_count": int(failed), "failure_count": 0,
            "error": None, "skip_reason": None if failed else "nothing due", "run_ids": [], "run_keys": [],
            "origin_run_ids": []}
    text = json.dumps(body, sort_keys=True)
    return text.replace('"error": null', f'"error": {serialize_value(error)}') if error else text


def seed(instance: dg.DagsterInstance, total: int, now: float) -> None:
    items = load_definitions()
    import datetime as dt

    moment = dt.datetime.fromtimestamp(now, dt.UTC)
    rates = {selector_id(item): 1 / nominal_interval(item, moment) for item in items}
    per_second = sum(rates.values())
    span = total / per_second  # seconds of history that gives `total` ticks
    rows = []
    storage = instance.schedule_storage
    for item in items:
        key = selector_id(item)
        count = max(1, int(span * rates[key]))
        interval = span / count
        kind = item.kind.upper()  # InstigatorType values: SENSOR, SCHEDULE
        for i in range(count):
            stamp = now - span + i * interval
            failed = i % 97 == 0
            status = "FAILURE" if failed else "SKIPPED"  # TickStatus values
            rows.append({"job_origin_id": key, "selector_id": key, "status": status, "type": kind,
                         "timestamp": dt.datetime.fromtimestamp(stamp, dt.UTC).replace(tzinfo=None),
                         "tick_body": tick_body(key, item.name, kind, status, stamp, failed)})
            if len(rows) >= BATCH:
                with storage.connect() as conn:  # commits on exit (dagster-postgres' connections autocommit)
                    conn.execute(job_ticks.insert(), rows)
                rows = []
    with storage.connect() as conn:
        if rows:
            conn.execute(job_ticks.insert(), rows)
        conn.execute(sa.text("ANALYZE job_ticks"))


def per_instigator(instance: dg.DagsterInstance) -> None:
    for item in load_definitions():
        key = selector_id(item)
        instance.get_ticks(key, key, limit=TICK_HISTORY)


def dagster_batch(instance: dg.DagsterInstance) -> None:
    instance.get_batch_ticks([selector_id(item) for item in load_definitions()], limit=TICK_HISTORY)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--ticks", type=int, nargs="+", default=[100_000, 400_000])
    parser.add_argument("--repeats", type=int, default=20)
    args = parser.parse_args()
    server = start_embedded_postgres(Path(tempfile.mkdtemp(prefix="bench-pg-")) / "pgdata", delete_on_exit=True)
    try:
        url = ensure_database(psycopg2_url(server.get_uri()), "bench_alerts")
        with dg.instance_for_test(overrides={"storage": {"postgres": {"postgres_url": url}}}) as instance:
            items = load_definitions()
            print(f"{len(items)} schedules and sensors")
            seeded = 0
            for total in sorted(args.ticks):
                started = time.perf_counter()
                seed(instance, total - seeded, time.time())
                seeded = total
                print(f"\n{total} ticks in the table (seeded in {time.perf_counter() - started:.0f} s)")
                ids = [selector_id(item) for item in items]
                assert {k: [t.tick_id for t in v] for k, v in newest_ticks(instance, ids, TICK_HISTORY).items()} == {
                    k: [t.tick_id for t in v] for k, v in instance.get_batch_ticks(ids, TICK_HISTORY).items()}
                variants = {
                    "tick_states (newest_ticks: LATERAL, index)": lambda: tick_states(instance, items),
                    "Dagster get_batch_ticks (window over all)": lambda: dagster_batch(instance),
                    "one Dagster get_ticks per instigator": lambda: per_instigator(instance),
                }
                times: dict[str, list[float]] = {name: [] for name in variants}
                for _ in range(args.repeats):  # alternating, so load changes hit every variant alike
                    for name, run in variants.items():
                        t0 = time.perf_counter()
                        run()
                        times[name].append((time.perf_counter() - t0) * 1000)
                medians = {name: statistics.median(values) for name, values in times.items()}
                base = medians["tick_states (newest_ticks: LATERAL, index)"]
                for name, values in times.items():
                    print(f"  {name:45s} median {medians[name]:8.1f} ms  max {max(values):8.1f} ms  "
                          f"x{medians[name] / base:.1f}")
    finally:
        server.cleanup()


if __name__ == "__main__":
    main()
