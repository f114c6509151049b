"""Benchmark: the race database's upsert (executemany ... RETURNING) versus the multi-row `.values([...])` form it
replaced, on embedded Postgres, alternating in one run.

Input: the real 2025-07-17 meetings sample (76 meetings, 748 races), stored whole, and one meeting at a time (a
morning-scrape step stores about one meeting and a dozen races). Both forms must report the same counts: every row
written on the first pass, none on a repeat (nothing changed), the two races renamed on a third.

    .venv/bin/python bench/race_db_upsert.py [--repeats 15]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import sqlalchemy as sa  # noqa: E402
from sqlalchemy.dialects.postgresql import insert as pg_insert  # noqa: E402

from racing_orchestration.race_db import store, upsert  # noqa: E402

SAMPLE = (Path(__file__).resolve().parent.parent / "tests" / "racing_orchestration" / "tab" / "samples"
          / "nz_meetings_list_2025-07-17.json")


def values_form(conn: sa.Connection, table: sa.Table, rows: list[dict[str, Any]], key, extra_set=None, compare=None):
    """The previous upsert: one INSERT ... VALUES (...), (...) per 1000 rows, compiled anew on every call."""
    written = 0
    cols = [c for c in rows[0] if c not in key]
    compare = cols if compare is None else compare
    for start in range(0, len(rows), 1000):
        stmt = pg_insert(table).values(rows[start : start + 1000])
        excluded = stmt.excluded
        set_ = {c: excluded[c] for c in cols}
        if "updated_at" in table.c:
            set_["updated_at"] = sa.func.now()
        if extra_set:
            set_.update(extra_set(excluded))
        changed = sa.tuple_(*(table.c[c] for c in compare)).is_distinct_from(sa.tuple_(*(excluded[c] for c in compare)))
        written += conn.execute(stmt.on_conflict_do_update(index_elements=list(key), set_=set_, where=changed)).rowcount
    return written


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--repeats", type=int, default=15)
    args = parser.parse_args()

    from local_stack.embedded_postgres import ensure_database, psycopg2_url, start_embedded_postgres
    from racing_orchestration.race_db import upgrade
    from racing_orchestration.tab.models import parse_meetings_response

    server = start_embedded_postgres(Path(tempfile.mkdtemp(prefix="bench-pg-")) / "pgdata", delete_on_exit=True)
    url = ensure_database(psycopg2_url(server.get_uri()), "racing")
    upgrade(url)
    engine = sa.create_engine(url)
    meetings = parse_meetings_response(json.loads(SAMPLE.read_text()))
    current = upsert.upsert_rows
    forms = {"executemany ... RETURNING (current)": current, "VALUES (...), (...) (previous)": values_form}
    results: dict[tuple[str, str], dict[str, list[float]]] = {}
    for workload, batches in (("whole day, 76 meetings / 748 races", [meetings]),
                              ("one meeting per call, 76 calls", [[m] for m in meetings])):
        for _ in range(args.repeats):
            for name, form in forms.items():
                store.upsert_rows = form  # upsert_meetings calls the module's name
                with engine.begin() as conn:
                    conn.execute(sa.text("TRUNCATE meetings, races CASCADE"))
                counts = []
                timing = results.setdefault((workload, name), {"first": [], "repeat": [], "first_cpu": []})
                for phase in ("first", "repeat"):
                    wall, cpu = time.perf_counter(), time.process_time()
                    changed = 0
                    for batch in batches:
                        with engine.begin() as conn:
                            changed += store.upsert_meetings(conn, batch).races_changed
                    timing[phase].append(time.perf_counter() - wall)
                    if phase == "first":
                        timing["first_cpu"].append(time.process_time() - cpu)
                    counts.append(changed)
                races = sorted((r for m in meetings for r in m.races), key=lambda r: r.race_id)
                renamed_ids = {races[0].race_id, races[-1].race_id}
                renamed = [m.model_copy(update={"races": [r.model_copy(update={"name": "Renamed"})
                                                          if r.race_id in renamed_ids else r for r in m.races]})
                           for m in meetings]
                with engine.begin() as conn:
                    counts.append(store.upsert_meetings(conn, renamed).races_changed)
                assert counts == [748, 0, 2], (name, counts)
    store.upsert_rows = current
    engine.dispose()
    server.cleanup()

    print(f"machine: {os.cpu_count()} cores; repeats {args.repeats}, alternating; counts checked: 748, 0, 2")
    for workload in dict.fromkeys(w for w, _ in results):
        print(workload)
        medians = {}
        for name in forms:
            t = results[(workload, name)]
            medians[name] = statistics.median(t["first"])
            print(f"  {name:38s} first write {statistics.median(t['first']) * 1000:7.1f} ms "
                  f"(CPU {statistics.median(t['first_cpu']) * 1000:6.1f} ms), "
                  f"unchanged repeat {statistics.median(t['repeat']) * 1000:7.1f} ms")
        new, old = medians.values()
        print(f"  previous / current (first write): {old / new:.1f}x")
    return 0


if __name__ == "__main__":
    sys.exit(main())
