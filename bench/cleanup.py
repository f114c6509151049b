"""Benchmark: `prune_successful_runs` (bulk SQL) versus a serial `instance.delete_run` loop, on embedded Postgres.

Two databases on one embedded server receive identical data: N old successful runs (7 event rows and a compute-log
file each) plus K runs that must be kept (old failures, old partial successes, old failed runs with their successful
re-executions, recent successes). Database A is pruned by the cleanup, database B by the serial loop over the same
deletable ids. Both are then checked: the deletable runs and their events are gone, the kept set is intact.

Data is inserted as the rows `add_historical_run` / `store_event` write (the serialized run and event bodies and the
columns of orchestration_core/dagster_schema.py that the cleanup reads), in multi-row INSERTs, because 44k `add_run`
calls would take longer than the measurement itself. Memory: RSS is sampled after every cleanup batch; tracemalloc
gives the Python peak.

    .venv/bin/python bench/cleanup.py                     # 20k + 2k, once
    .venv/bin/python bench/cleanup.py --runs 2000 --kept 200 --repeats 3
"""

from __future__ import annotations

import argparse
import os
import resource
import statistics
import sys
import tempfile
import time
import tracemalloc
import uuid
from concurrent.futures import ThreadPoolExecutor
from contextlib import ExitStack
from datetime import UTC, datetime, timedelta
from pathlib import Path

import dagster as dg
import sqlalchemy as sa
from dagster import EventLogEntry

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from local_stack.embedded_postgres import (  # noqa: E402
    drop_database,
    ensure_database,
    psycopg2_url,
    start_embedded_postgres,
)
from orchestration_core.audit.cleanup import prune_successful_runs  # noqa: E402
from orchestration_core.dagster_schema import event_logs, run_tags, runs  # noqa: E402
from orchestration_core.run_outcome import Outcome, outcome_tags  # noqa: E402

JOB = "bench_scrape"
CHUNK = 1000
# An engine event's (empty) EngineEventData, in Dagster's serialized form: the class has no public import.
ENGINE_EVENT_DATA = '{"__class__": "EngineEventData"}'


def rss_mib() -> float:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2**20


def _events(run_id: str, ts: float, failed: bool) -> list[EventLogEntry]:
    def dagster(kind: dg.DagsterEventType, offset: float) -> EventLogEntry:
        data = dg.deserialize_value(ENGINE_EVENT_DATA) if kind == dg.DagsterEventType.ENGINE_EVENT else None
        event = dg.DagsterEvent(event_type_value=kind.value, job_name=JOB, message=kind.value, event_specific_data=data)
        return EventLogEntry(
            error_info=None, level=20, user_message="", run_id=run_id, timestamp=ts + offset, job_name=JOB,
            dagster_event=event,
        )

    def user_log(msg: str, offset: float) -> EventLogEntry:
        return EventLogEntry(
            error_info=None, level=20, user_message=msg, run_id=run_id, timestamp=ts + offset, job_name=JOB,
            step_key="scrape",
        )

    end = dg.DagsterEventType.RUN_FAILURE if failed else dg.DagsterEventType.RUN_SUCCESS
    return [
        dagster(dg.DagsterEventType.RUN_START, 0),
        dagster(dg.DagsterEventType.ENGINE_EVENT, 0.1),
        user_log("fetching meetings", 0.2),
        user_log("stored 58 races", 0.3),
        dagster(dg.DagsterEventType.ENGINE_EVENT, 0.4),
        dagster(dg.DagsterEventType.ENGINE_EVENT, 0.5),
        dagster(end, 0.6),
    ]


def build_specs(n_delete: int, n_keep: int) -> tuple[list[dict], set[str], set[str]]:
    """Deterministic run specs (same ids in both databases): (specs, deletable ids, kept ids)."""
    now = datetime.now(UTC)
    specs: list[dict] = []

    def add(status, age_days, tags=None, parent=None) -> str:
        run_id = str(uuid.uuid4())
        specs.append({"run_id": run_id, "status": status, "created": now - timedelta(days=age_days), "tags": tags or {},
                      "parent": parent})
        return run_id

    deletable = {add(dg.DagsterRunStatus.SUCCESS, 15 + i % 30) for i in range(n_delete)}
    kept: set[str] = set()
    quarter = n_keep // 4
    for i in range(quarter):
        kept.add(add(dg.DagsterRunStatus.FAILURE, 20 + i % 10))
        kept.add(add(dg.DagsterRunStatus.SUCCESS, 20 + i % 10, outcome_tags(Outcome.PARTIAL, 50, 8)))
    for i in range(quarter // 2):
        parent = add(dg.DagsterRunStatus.FAILURE, 25)
        child = add(dg.DagsterRunStatus.SUCCESS, 24, {"dagster/parent_run_id": parent, "dagster/root_run_id": parent,
                                                       "dagster/retry_number": "1"}, parent=parent)
        kept |= {parent, child}
    while len(kept) < n_keep:
        kept.add(add(dg.DagsterRunStatus.SUCCESS, 1))
    return specs, deletable, kept


def run_row(run: dg.DagsterRun, created: datetime) -> dict:
    """The runs row `add_historical_run` writes for a finished run created at `created` (no snapshot, no
    partition), with the start and end times the run worker would set."""
    naive = created.astimezone(UTC).replace(tzinfo=None)  # Dagster's timestamp columns hold naive UTC
    return {"run_id": run.run_id, "pipeline_name": run.job_name, "status": run.status.value,
            "run_body": dg.serialize_value(run), "create_timestamp": naive, "update_timestamp": naive,
            "start_time": created.timestamp(), "end_time": created.timestamp() + 0.6}


def event_row(entry: EventLogEntry) -> dict:
    """The event_logs row `store_event` writes for a run event with no asset."""
    dagster_event = entry.dagster_event
    return {"run_id": entry.run_id, "event": dg.serialize_value(entry),
            "dagster_event_type": dagster_event.event_type_value if dagster_event else None,
            "timestamp": datetime.fromtimestamp(entry.timestamp, UTC).replace(tzinfo=None),
            "step_key": dagster_event.step_key if dagster_event else entry.step_key}


def log_path(instance: dg.DagsterInstance, run_id: str) -> Path:
    """Where the compute log manager keeps a run's captured stdout of one step (its public path lookup)."""
    return Path(instance.compute_log_manager.get_captured_local_path([run_id, "compute_logs", "abcdefgh"], "out"))


def load(instance: dg.DagsterInstance, specs: list[dict]) -> None:
    with instance.run_storage.connect() as conn:
        for start in range(0, len(specs), CHUNK):
            rows, tags = [], []
            for s in specs[start : start + CHUNK]:
                run = dg.DagsterRun(job_name=JOB, run_id=s["run_id"], status=s["status"], tags=s["tags"],
                                    parent_run_id=s["parent"], root_run_id=s["parent"])
                rows.append(run_row(run, s["created"]))
                tags += [{"run_id": s["run_id"], "key": k, "value": v} for k, v in run.tags_for_storage().items()]
            conn.execute(runs.insert().values(rows))  # one statement, one commit per chunk
            if tags:
                conn.execute(run_tags.insert().values(tags))
    with instance.event_log_storage.index_connection() as conn:
        for start in range(0, len(specs), CHUNK):
            rows = [
                event_row(e)
                for s in specs[start : start + CHUNK]
                for e in _events(s["run_id"], s["created"].timestamp(), s["status"] == dg.DagsterRunStatus.FAILURE)
            ]
            conn.execute(event_logs.insert().values(rows))

    def write_log(run_id: str) -> None:
        path = log_path(instance, run_id)
        path.parent.mkdir(parents=True)
        path.write_text("stored 58 races\n")

    with ThreadPoolExecutor(max_workers=8) as pool:
        list(pool.map(write_log, [s["run_id"] for s in specs]))


def counts(instance: dg.DagsterInstance, ids: set[str]) -> tuple[int, int]:
    with instance.run_storage.connect() as conn:
        id_list = list(ids)
        n_runs = n_events = 0
        for start in range(0, len(id_list), 5000):
            chunk = id_list[start : start + 5000]
            n_runs += conn.execute(sa.text("SELECT count(*) FROM runs WHERE run_id = ANY(:i)"), {"i": chunk}).scalar()
            n_events += conn.execute(
                sa.text("SELECT count(*) FROM event_logs WHERE run_id = ANY(:i)"), {"i": chunk}
            ).scalar()
    return n_runs, n_events


class RssProbe:
    """Stands in for the op's logger: samples RSS after every batch."""

    def __init__(self) -> None:
        self.samples: list[float] = []

    def info(self, _msg: str) -> None:
        self.samples.append(rss_mib())


def one_round(server_url: str, n_delete: int, n_keep: int, batch: int, trace: bool) -> dict:
    specs, deletable, kept = build_specs(n_delete, n_keep)
    result: dict = {}
    with ExitStack() as stack:
        instances = {}
        for name in ("bulk", "serial"):
            db = f"bench_cleanup_{name}_{uuid.uuid4().hex[:6]}"
            url = ensure_database(server_url, db)
            stack.callback(drop_database, server_url, db)
            inst = stack.enter_context(dg.instance_for_test(overrides={"storage": {"postgres": {"postgres_url": url}}}))
            t0 = time.perf_counter()
            load(inst, specs)
            result[f"load_{name}_s"] = time.perf_counter() - t0
            instances[name] = inst
        kept_before = counts(instances["bulk"], kept)
        assert counts(instances["serial"], kept) == kept_before

        probe = RssProbe()
        if trace:
            tracemalloc.start()
        t0 = time.perf_counter()
        report = prune_successful_runs(instances["bulk"], 14, batch_size=batch, log=probe)
        result["bulk_s"] = time.perf_counter() - t0
        result["tracemalloc_peak_mib"] = tracemalloc.get_traced_memory()[1] / 2**20 if trace else float("nan")
        tracemalloc.stop()
        result["rss_per_batch_mib"] = probe.samples
        assert report.deleted == n_delete, report

        serial = instances["serial"]
        t0 = time.perf_counter()
        for run_id in sorted(deletable):
            serial.delete_run(run_id)
        result["serial_s"] = time.perf_counter() - t0

        for name, inst in instances.items():
            assert counts(inst, deletable) == (0, 0), name
            assert counts(inst, kept) == kept_before, f"{name}: kept set changed"
        for name, inst in instances.items():  # a run's directory: <base>/<run id>/compute_logs/<file>
            result[f"{name}_log_dirs_left"] = sum(1 for r in deletable if log_path(inst, r).parent.parent.exists())
        result["kept_runs"], result["kept_events"] = kept_before
    return result


def sampled_round(server_url: str, n_delete: int, n_keep: int, batch: int, sample: int) -> dict:
    """Full scale in one database: serial delete_run over `sample` deletable runs, the cleanup over the rest."""
    specs, deletable, kept = build_specs(n_delete, n_keep)
    db = f"bench_cleanup_full_{uuid.uuid4().hex[:6]}"
    url = ensure_database(server_url, db)
    try:
        with dg.instance_for_test(overrides={"storage": {"postgres": {"postgres_url": url}}}) as inst:
            t0 = time.perf_counter()
            load(inst, specs)
            load_s = time.perf_counter() - t0
            kept_before = counts(inst, kept)
            serial_ids = sorted(deletable)[:sample]
            t0 = time.perf_counter()
            for run_id in serial_ids:
                inst.delete_run(run_id)
            serial_s = time.perf_counter() - t0
            probe = RssProbe()
            t0 = time.perf_counter()
            report = prune_successful_runs(inst, 14, batch_size=batch, log=probe)
            bulk_s = time.perf_counter() - t0
            assert report.deleted == n_delete - sample, report
            assert counts(inst, deletable) == (0, 0)
            assert counts(inst, kept) == kept_before, "kept set changed"
    finally:
        drop_database(server_url, db)
    per_run_serial = serial_s / sample
    per_run_bulk = bulk_s / report.deleted
    rss = probe.samples
    print(
        f"full scale {n_delete}+{n_keep}: load {load_s:.0f}s | serial delete_run over {sample} runs {serial_s:.1f}s "
        f"({per_run_serial * 1000:.1f} ms/run) | cleanup over {report.deleted} runs {bulk_s:.1f}s "
        f"({per_run_bulk * 1000:.2f} ms/run) | per-run ratio {per_run_serial / per_run_bulk:.1f}x | "
        f"projected serial for {n_delete}: {per_run_serial * n_delete:.0f}s | RSS per batch min/median/max "
        f"{min(rss):.0f}/{statistics.median(rss):.0f}/{max(rss):.0f} MiB over {len(rss)} batches | "
        f"kept {kept_before[0]} runs/{kept_before[1]} events intact",
        flush=True,
    )
    return {"bulk_s": bulk_s, "serial_s": serial_s}


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=20_000, help="old successful runs to delete")
    parser.add_argument("--kept", type=int, default=2_000, help="runs that must survive")
    parser.add_argument("--batch", type=int, default=500)
    parser.add_argument("--repeats", type=int, default=1)
    parser.add_argument("--serial-sample", type=int, default=0,
                        help="full-scale mode: time delete_run on this many runs, the cleanup on the rest (one database)")
    parser.add_argument("--tracemalloc", action="store_true", help="trace Python allocations (slows the cleanup down)")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        server = start_embedded_postgres(Path(tmp) / "pg", delete_on_exit=True)
        url = psycopg2_url(server.get_uri())
        if args.serial_sample:
            sampled_round(url, args.runs, args.kept, args.batch, args.serial_sample)
            server.cleanup()
            return
        rounds = []
        for i in range(args.repeats):
            r = one_round(url, args.runs, args.kept, args.batch, args.tracemalloc)
            rounds.append(r)
            rss = r["rss_per_batch_mib"]
            print(
                f"round {i + 1}: load {r['load_bulk_s']:.1f}s+{r['load_serial_s']:.1f}s | cleanup {r['bulk_s']:.2f}s | "
                f"serial delete_run {r['serial_s']:.2f}s | ratio {r['serial_s'] / r['bulk_s']:.1f}x | "
                f"RSS per batch first/median/last {rss[0]:.0f}/{statistics.median(rss):.0f}/{rss[-1]:.0f} MiB "
                f"({len(rss)} batches) | tracemalloc peak {r['tracemalloc_peak_mib']:.1f} MiB | "
                f"kept {r['kept_runs']} runs/{r['kept_events']} events intact | "
                f"log dirs left: cleanup {r['bulk_log_dirs_left']}, serial {r['serial_log_dirs_left']}",
                flush=True,
            )
        bulk = statistics.median(r["bulk_s"] for r in rounds)
        serial = statistics.median(r["serial_s"] for r in rounds)
        print(f"median over {len(rounds)}: cleanup {bulk:.2f}s, serial {serial:.2f}s, ratio {serial / bulk:.1f}x; "
              f"peak RSS (ru_maxrss) {resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024:.0f} MiB")
        server.cleanup()


if __name__ == "__main__":
    main()
