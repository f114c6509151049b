"""Benchmark: the daily Parquet export (race_day_export's writer) for a 40-race day and for a year of days, and
reading them back with pandas, on embedded Postgres.

The race database is filled with the simulated feed's racing days (seed 1, NZ and AUS, every category: the defaults
of the morning scrape), each race with its runners, T-60 and T-15 odds, Final results and dividends, written straight
with SQL (the rows the runs would store; going through HTTP and the checkpoint runs would take hours for a year).
Then:

- a 40-race day (the simulated feed's dense card) exported into a fresh folder (every file written) and again into
  the same folder (nothing changed: every file compared and left alone), repeated, medians;
- every day of the year exported into one fresh folder, one day after another as a backfill run does: wall and CPU per
  day (median, p95, max), the total, peak memory, bytes per table;
- README's one-line pandas load of a month and of the whole year of races and of odds.

    .venv/bin/python bench/export.py [--days 365] [--repeats 9]
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import resource
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import pandas as pd  # noqa: E402
import sqlalchemy as sa  # noqa: E402

from racing_orchestration.export.tables import EXPORT_TABLES  # noqa: E402
from racing_orchestration.export.writer import export_day  # noqa: E402
from racing_orchestration.race_db import schema  # noqa: E402
from racing_orchestration.tab.sim_day import SimMeeting, generate_dense, generate_day  # noqa: E402
from racing_orchestration.tab.sim_payloads import _dividends, _results, runner_odds  # noqa: E402

COUNTRIES = ("NZ", "AUS")
FIRST_DAY = dt.date(2025, 1, 1)
DENSE_DAY = dt.date(2024, 12, 31)  # the 40-race day, apart from the year


def _rows(meetings: list[SimMeeting]) -> dict[str, list[dict]]:
    """The rows the morning scrape, the T-60/T-15 runs and the post-race chain store for these meetings."""
    rows: dict[str, list[dict]] = {name: [] for name in ("meetings", "races", "runners", "odds", "results",
                                                         "dividends")}
    for m in meetings:
        rows["meetings"].append({"meeting_id": m.meeting_id, "name": m.name, "meeting_date": m.date,
                                 "category": m.category, "category_name": None, "country": m.country,
                                 "state": m.state, "track_condition": m.track_condition})
        for race in m.races:
            rows["races"].append({"race_id": race.race_id, "meeting_id": m.meeting_id, "race_number": race.number,
                                  "name": race.name, "start_time": race.jump(), "status": "Final",
                                  "distance": race.distance, "track_condition": m.track_condition,
                                  "weather": race.weather, "country": m.country,
                                  "actual_start": race.jump() + race.jump_jitter})
            for r in race.runners:
                rows["runners"].append({"race_id": race.race_id, "runner_number": r.number, "entrant_id": r.entrant_id,
                                        "name": r.name, "barrier": r.barrier, "jockey": r.jockey,
                                        "trainer_name": r.trainer, "is_scratched": r.scratched_at is not None,
                                        "is_late_scratched": r.late_scratch, "scratch_time": r.scratched_at})
                for checkpoint, minutes in (("t60", 60), ("t15", 15)):
                    at = race.scheduled_start - dt.timedelta(minutes=minutes)
                    rows["odds"].append({"race_id": race.race_id, "runner_number": r.number,
                                         "checkpoint": checkpoint, **runner_odds(race, r, at),
                                         "is_scratched": r.scratched(at), "captured_at": at, "run_id": "bench"})
            for result in _results(race):
                rows["results"].append({"race_id": race.race_id, "runner_number": result["runner_number"],
                                        "position": result["position"], "name": result["name"],
                                        "entrant_id": result["entrant_id"],
                                        "margin_length": result["margin_length"], "is_provisional": False})
            for dividend in _dividends(race, "Final") if race.finish_order else []:
                rows["dividends"].append({"race_id": race.race_id, "dividend_id": dividend["id"],
                                          "product_name": dividend["product_name"], "status": "Final",
                                          "dividend": dividend["dividend"], "pool_size": dividend["pool_size"],
                                          "positions": [[p["runner_number"], p["position"]]
                                                        for p in dividend["positions"]],
                                          "description": dividend["description"], "tote": dividend["tote"]})
    return rows


TABLES = {"meetings": schema.meetings, "races": schema.races, "runners": schema.runners,
          "odds": schema.odds_snapshots, "results": schema.results, "dividends": schema.dividends}


def _store(engine: sa.Engine, meetings: list[SimMeeting]) -> dict[str, int]:
    rows = _rows(meetings)
    with engine.begin() as conn:
        for name, table in TABLES.items():
            if rows[name]:
                conn.execute(table.insert(), rows[name])
    return {name: len(values) for name, values in rows.items()}


def _day(meetings: list[SimMeeting]) -> list[SimMeeting]:
    return [m for m in meetings if m.country in COUNTRIES]


def _percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--days", type=int, default=365)
    parser.add_argument("--repeats", type=int, default=9)
    args = parser.parse_args()

    from local_stack.embedded_postgres import ensure_database, psycopg2_url, start_embedded_postgres
    from racing_orchestration.race_db import upgrade

    work = Path(tempfile.mkdtemp(prefix="bench-export-"))
    server = start_embedded_postgres(work / "pgdata", delete_on_exit=True)
    url = ensure_database(psycopg2_url(server.get_uri()), "racing")
    upgrade(url)
    engine = sa.create_engine(url)
    report: dict = {}
    try:
        # --- fill ---------------------------------------------------------------------------------------------
        started = time.perf_counter()
        first = dt.datetime.combine(DENSE_DAY, dt.time(1), dt.UTC)
        dense = generate_dense(1, first, dt.timedelta(minutes=10), 40)
        dense = [SimMeeting(**{**m.__dict__, "date": DENSE_DAY}) for m in dense]
        totals = _store(engine, dense)
        days = [FIRST_DAY + dt.timedelta(days=n) for n in range(args.days)]
        for day in days:
            for name, count in _store(engine, _day(generate_day(1, day))).items():
                totals[name] += count
        with engine.begin() as conn:
            conn.execute(sa.text("ANALYZE"))
        report["fill"] = {"seconds": round(time.perf_counter() - started, 1), "rows": totals}
        print(f"filled {args.days} days + the 40-race day in {report['fill']['seconds']} s: {totals}", flush=True)

        # --- a 40-race day --------------------------------------------------------------------------------------
        fresh, unchanged, cpu = [], [], []
        for n in range(args.repeats):
            root = work / f"dense-{n}"
            c0 = time.process_time()
            with engine.connect() as conn:
                written = export_day(conn, DENSE_DAY, root)
            cpu.append(time.process_time() - c0)
            fresh.append(written.seconds)
            assert written.files_written == len(EXPORT_TABLES) and written.rows["races"] == 40, written
            with engine.connect() as conn:
                again = export_day(conn, DENSE_DAY, root)
            unchanged.append(again.seconds)
            assert again.files_written == 0
        report["forty_race_day"] = {
            "rows": written.rows, "first_write_s_median": round(statistics.median(fresh), 4),
            "first_write_s_max": round(max(fresh), 4), "cpu_s_median": round(statistics.median(cpu), 4),
            "unchanged_s_median": round(statistics.median(unchanged), 4),
            "bytes": sum(t.path.stat().st_size for t in written.tables),
        }
        print("40-race day:", json.dumps(report["forty_race_day"]), flush=True)

        # --- a year ---------------------------------------------------------------------------------------------
        root = work / "year"
        walls, cpus, races = [], [], 0
        year_started, year_cpu = time.perf_counter(), time.process_time()
        for day in days:
            c0 = time.process_time()
            with engine.connect() as conn:
                export = export_day(conn, day, root)
            cpus.append(time.process_time() - c0)
            walls.append(export.seconds)
            races += export.rows["races"]
        sizes = {t.name: sum(p.stat().st_size for p in (root / t.name).glob("*.parquet")) for t in EXPORT_TABLES}
        report["year"] = {
            "days": len(days), "races": races, "total_s": round(time.perf_counter() - year_started, 1),
            "total_cpu_s": round(time.process_time() - year_cpu, 1),
            "per_day_s": {"median": round(statistics.median(walls), 3), "p95": round(_percentile(walls, 0.95), 3),
                          "max": round(max(walls), 3)},
            "per_day_cpu_s_median": round(statistics.median(cpus), 3),
            "peak_rss_mb": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1),
            "megabytes": {name: round(size / 1e6, 1) for name, size in sizes.items()},
        }
        print("year:", json.dumps(report["year"]), flush=True)

        # --- reading it back (README's one-liner) ----------------------------------------------------------------
        reads = {}
        for table in ("races", "odds"):
            for label, low, high in (("month", dt.date(2025, 3, 1), dt.date(2025, 4, 1)),
                                     ("year", FIRST_DAY, FIRST_DAY + dt.timedelta(days=args.days))):
                t0 = time.perf_counter()
                frame = pd.read_parquet(root / table, filters=[("meeting_date", ">=", low),
                                                               ("meeting_date", "<", high)])
                reads[f"{table}_{label}"] = {"rows": len(frame), "seconds": round(time.perf_counter() - t0, 3)}
        report["read_back"] = reads
        print("read back:", json.dumps(reads), flush=True)
        print(json.dumps(report, indent=2, default=str))
    finally:
        engine.dispose()
        server.cleanup()
        shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
