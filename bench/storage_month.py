"""A month in an hour: what run retention leaves in Postgres day after day, by hand.

    nice -n 19 .venv/bin/python bench/storage_month.py --days 60 --runs-per-day 9200 --failed-share 0.02 --json OUT
    .venv/bin/python bench/storage_month.py --days 20 --runs-per-day 300            # a quick check

On an embedded Postgres (a Dagster storage database and a maintenance registry), each simulated day fabricates
`--runs-per-day` finished runs spread over the day through Dagster's own storage APIs: the run row with its tags
(`run_storage.add_historical_run`, the creation time in the past), the run's events copied from a real in-process
execution of a one-op job of the same outcome, one `instance.handle_new_event` each (as a run worker reports them; the
run-level ones also set the run's start and end times). `--failed-share` of them document a problem: 70%
failed runs (with the real failure's events and stack trace), 30% partial successes; every other failed run gets a
successful re-execution (a recovery). `--maintenance-share` are maintenance runs (a task tag, recorded in the
execution history: one `task_executions` row each), the rest racing runs.

At the end of each day the project's nightly retention runs as `cleanup_job_runs` does (`prune_successful_runs`, 14
days, `--failed-retention-days` as RUN_RETENTION_FAILED_DAYS, its VACUUM (ANALYZE) of the emptied tables, its weekly
REINDEX at `--reindex-every-days`), and the execution history's (`--history-days` as MAINTENANCE_HISTORY_DAYS). Printed per day: the Dagster database's tables'
bytes, runs kept (and those kept for a problem), event_logs rows, its dead tuples after the deletes and after the
VACUUM (pg_stat_user_tables) against autovacuum's threshold (50 + 20% of the rows), the history's bytes. At the end:
bytes a day of runs takes while kept, the plateau, and the yearly growth of what is kept on purpose (problem runs,
the execution history, the export folder at `--export-bytes-per-day`).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
import uuid
from contextlib import ExitStack
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

DAY = timedelta(days=1)
SUCCESS_RETENTION_DAYS = 14
AUTOVACUUM_BASE_THRESHOLD = 50  # Postgres' autovacuum_vacuum_threshold default
AUTOVACUUM_SCALE_FACTOR = 0.2  # autovacuum_vacuum_scale_factor default
FAILED_OF_PROBLEMS = 0.7  # the rest of the problem runs are partial successes
# A 40-race day's six Parquet files are 73 KB (BENCHMARKS.md "Race data export"), ~1.8 KB a race; the simulated year
# averages 143 races a day.
DEFAULT_EXPORT_BYTES_PER_DAY = round(73_000 / 40 * 143)
MAINTENANCE_TASKS = [f"task_{i:02d}" for i in range(8)]
MAINTENANCE_JOBS = ["example_executor", "config_backup_executor", "plugin_executor"]
RACING_JOBS = ["pre_race_t60", "pre_race_t15", "post_race_t5", "card_refresh", "race_day_export"]
CHUNK = 200


# ---------------------------------------------------------------------------------------------------------------
# Pure arithmetic (tests/bench/test_storage_month.py)


@dataclass(frozen=True)
class DayPlan:
    successes: int
    failed: int
    partial: int
    recoveries: int

    @property
    def total(self) -> int:
        return self.successes + self.failed + self.partial + self.recoveries

    @property
    def problems(self) -> int:
        return self.failed + self.partial


def day_plan(runs_per_day: int, failed_share: float) -> DayPlan:
    """How one day's runs split: problems (failed, partial) at `failed_share`, a recovery for every other failure,
    plain successes the rest, `runs_per_day` in all."""
    if runs_per_day < 1:
        raise ValueError(f"runs_per_day must be at least 1, got {runs_per_day}")
    if not 0 <= failed_share < 0.5:
        raise ValueError(f"failed_share must be in [0, 0.5), got {failed_share}")
    problems = round(runs_per_day * failed_share)
    failed = round(problems * FAILED_OF_PROBLEMS)
    partial = problems - failed
    recoveries = failed // 2
    return DayPlan(runs_per_day - problems - recoveries, failed, partial, recoveries)


def autovacuum_threshold(live_rows: float) -> int:
    """Dead tuples above which autovacuum vacuums a table (the defaults: 50 + 20% of its rows)."""
    return int(AUTOVACUUM_BASE_THRESHOLD + AUTOVACUUM_SCALE_FACTOR * max(live_rows, 0))


def slope(xs: list[float], ys: list[float]) -> float:
    """Least-squares slope of ys over xs (0 for fewer than two points)."""
    n = len(xs)
    if n < 2:
        return 0.0
    mx, my = sum(xs) / n, sum(ys) / n
    sxx = sum((x - mx) ** 2 for x in xs)
    return sum((x - mx) * (y - my) for x, y in zip(xs, ys, strict=True)) / sxx if sxx else 0.0


def summarize(days: list[dict], retention_days: int, export_bytes_per_day: float) -> dict:
    """From the per-day rows (day, dagster_bytes, history_bytes, problem_runs): what a day of runs costs while kept
    (slope before retention deletes anything), what grows on purpose afterwards (slope once retention deletes a day a
    day), the difference (the successes' day), the plateau they reach, and the yearly growth of what is kept."""
    before = [d for d in days if d["day"] < retention_days]
    steady = [d for d in days if d["day"] >= retention_days + 2]
    all_per_day = slope([d["day"] for d in before], [d["dagster_bytes"] for d in before])
    kept_per_day = slope([d["day"] for d in steady], [d["dagster_bytes"] for d in steady])
    history_per_day = slope([d["day"] for d in days], [d["history_bytes"] for d in days])
    problems_per_day = slope([d["day"] for d in days], [d["problem_runs"] for d in days])
    success_per_day = all_per_day - kept_per_day
    return {
        "bytes_per_day_all_runs": round(all_per_day),
        "bytes_per_day_successes_while_kept": round(success_per_day),
        "success_plateau_bytes": round(success_per_day * (retention_days + 1)),
        "ceiling_bytes": max((d["dagster_bytes"] for d in steady), default=None),
        "kept_on_purpose_bytes_per_day": round(kept_per_day),
        "problem_runs_per_day": round(problems_per_day, 1),
        "history_bytes_per_day": round(history_per_day),
        "yearly_growth_bytes": {
            "problem_runs": round(kept_per_day * 365),
            "execution_history": round(history_per_day * 365),
            "exports": round(export_bytes_per_day * 365),
        },
        "steady_days": len(steady),
    }


def mib(n: float | None) -> str:
    return "-" if n is None else f"{n / 2**20:,.1f} MiB"


# ---------------------------------------------------------------------------------------------------------------
# The simulation


def _sample_jobs():
    import dagster as dg

    @dg.op
    def maintenance_task(context):  # no annotations: this module postpones them, Dagster resolves them
        context.log.info("task started: 3 items")
        context.add_output_metadata({"items_processed": 3, "items_failed": 0, "duration_ms": 412})
        return {"status": "success"}

    @dg.op
    def failing_task(context):
        context.log.info("task started: 3 items")
        raise RuntimeError("upstream answered 503 Service Unavailable")

    @dg.job(name="storage_month_success")
    def success_job() -> None:
        maintenance_task()

    @dg.job(name="storage_month_failure")
    def failure_job() -> None:
        failing_task()

    return success_job, failure_job


class Fabricator:
    """Copies a real run's events onto new runs with new ids and times."""

    def __init__(self, instances: list):
        import dagster as dg

        self.dg = dg
        self.instances = instances  # one per writer thread, each keeping its storage connections
        self.templates = {}
        instance = instances[0]
        for ok, job in zip((True, False), _sample_jobs(), strict=True):
            result = job.execute_in_process(instance=instance, raise_on_error=False)
            entries = instance.all_logs(result.run_id)
            start = entries[0].timestamp
            self.templates[ok] = (result.run_id, [(dg.serialize_value(e), e.timestamp - start) for e in entries])
            instance.delete_run(result.run_id)
        self.events_per_run = {ok: len(t[1]) for ok, t in self.templates.items()}

    def run(self, instance, spec: RunSpec) -> None:
        dg = self.dg
        run_id, job_name, created, ok, tags, parent = (spec.run_id, spec.job, spec.created, spec.ok, spec.tags,
                                                       spec.parent)
        if parent:
            tags = {**tags, "dagster/parent_run_id": parent, "dagster/root_run_id": parent}
        status = dg.DagsterRunStatus.SUCCESS if ok else dg.DagsterRunStatus.FAILURE
        run = dg.DagsterRun(job_name=job_name, run_id=run_id, status=status, tags=tags, parent_run_id=parent,
                            root_run_id=parent)
        instance.run_storage.add_historical_run(run, created)
        template_id, events = self.templates[ok]
        for body, offset in events:
            entry = dg.deserialize_value(body.replace(template_id, run_id), dg.EventLogEntry)
            instance.handle_new_event(entry._replace(timestamp=created.timestamp() + 1 + offset, job_name=job_name))

    def write(self, specs: list[RunSpec]) -> None:
        """Every run of `specs`, the instances' threads side by side (a run worker per run, as in production)."""
        with ThreadPoolExecutor(max_workers=len(self.instances)) as pool:
            shares = [specs[i :: len(self.instances)] for i in range(len(self.instances))]
            list(pool.map(lambda pair: [self.run(pair[0], spec) for spec in pair[1]], zip(self.instances, shares)))


def history_row(run_id: str, task: str, job: str, created: datetime, ok: bool, parent: str | None) -> dict:
    from maintenance_jobs.execution_history.summary import ExecutionSummary, execution_id

    return ExecutionSummary(
        id=execution_id(run_id), run_id=run_id, task_name=task, has_task=True, service="homelab", executor=job,
        priority=50, status="success" if ok else "failed", triggered_by="retry" if parent else "scheduler",
        triggered_at=created, started_at=created + timedelta(seconds=1), completed_at=created + timedelta(seconds=3),
        duration_seconds=2.1, output="processed 3 items" if ok else None,
        error=None if ok else "RuntimeError: upstream answered 503 Service Unavailable", retry_count=1 if parent else 0,
        metadata={"items_processed": 3, "items_failed": 0 if ok else 3, "duration_ms": 412},
        scheduled_for=created.replace(second=0, microsecond=0), parent_run_id=parent, job_name=job,
        dagster_status="SUCCESS" if ok else "FAILURE",
    ).row()


@dataclass(frozen=True)
class RunSpec:
    run_id: str
    job: str
    created: datetime
    ok: bool
    tags: dict
    parent: str | None
    task: str | None  # a maintenance run's task: it gets an execution-history row


def day_specs(day_start: datetime, plan: DayPlan, maintenance_share: float, seq: list[int]) -> list[RunSpec]:
    """One day's runs, spread evenly over it, the problems interleaved with the successes, a recovery right after
    every other failure."""
    from orchestration_core.audit.execution_history import TAG_HISTORY_RECORDED
    from orchestration_core.run_outcome import KIND_MAINTENANCE, KIND_RACING, TAG_KIND, TAG_MAINTENANCE_TASK, \
        Outcome, outcome_tags

    kinds = ["failed"] * plan.failed + ["partial"] * plan.partial + ["success"] * plan.successes
    n = len(kinds)
    stride = next(s for s in range(7919, 7919 + n + 2) if _coprime(s, n)) if n > 1 else 1
    step = DAY / (plan.total + 1)
    specs: list[RunSpec] = []
    moment = day_start
    failed_seen = 0
    for i in range(n):
        kind = kinds[(i * stride) % n]
        moment += step
        seq[0] += 1
        maintenance = (seq[0] % 1000) < maintenance_share * 1000
        tags = {TAG_KIND: KIND_MAINTENANCE if maintenance else KIND_RACING}
        if kind == "partial":
            tags.update(outcome_tags(Outcome.PARTIAL, 8, 2, "2 items failed"))
        task = None
        if maintenance:
            task = MAINTENANCE_TASKS[seq[0] % len(MAINTENANCE_TASKS)]
            job = MAINTENANCE_JOBS[seq[0] % len(MAINTENANCE_JOBS)]
            tags.update({TAG_MAINTENANCE_TASK: task, "maintenance/triggered_by": "scheduler",
                         "maintenance/priority": "50", "maintenance/scheduled_minute": moment.strftime("%Y-%m-%dT%H:%M")})
        else:
            job = RACING_JOBS[seq[0] % len(RACING_JOBS)]
        run_id = str(uuid.uuid4())
        own = {TAG_HISTORY_RECORDED: run_id} if maintenance else {}
        specs.append(RunSpec(run_id, job, moment, kind != "failed", {**tags, **own}, None, task))
        if kind == "failed":
            failed_seen += 1
            if failed_seen % 2 == 0:
                moment += step
                retry_id = str(uuid.uuid4())
                own = {TAG_HISTORY_RECORDED: retry_id} if maintenance else {}
                specs.append(RunSpec(retry_id, job, moment, True, {**tags, **own, "dagster/retry_number": "1"}, run_id,
                                     task))
    return specs


def record_history(history_engine, specs: list[RunSpec]) -> None:
    from maintenance_jobs.database.tables import task_executions

    rows = [history_row(s.run_id, s.task, s.job, s.created, s.ok, s.parent) for s in specs if s.task]
    for i in range(0, len(rows), CHUNK):
        _insert(history_engine, task_executions, rows[i : i + CHUNK])


def _coprime(a: int, b: int) -> bool:
    while b:
        a, b = b, a % b
    return a == 1


def _insert(engine, table, rows: list[dict]) -> None:
    with engine.begin() as conn:
        conn.execute(table.insert(), rows)


def force_stats_flush(instance) -> None:
    """The deletes' table statistics reach pg_stat_user_tables when their backend flushes them: ask the storages'
    connections (kept: the same backends) to do so now."""
    for connect in (instance.event_log_storage.index_connection, instance.run_storage.connect):
        with connect() as conn:
            conn.exec_driver_sql("SELECT pg_stat_force_next_flush()")
            if conn.in_transaction():
                conn.commit()
    time.sleep(1.2)


def table_stats(engine) -> dict:
    import sqlalchemy as sa

    with engine.connect() as conn:
        conn.exec_driver_sql("SELECT pg_stat_clear_snapshot()")
        rows = conn.execute(sa.text(
            "SELECT s.relname, s.n_live_tup, s.n_dead_tup, pg_total_relation_size(s.relid) AS bytes, c.reltuples "
            "FROM pg_stat_user_tables s JOIN pg_class c ON c.oid = s.relid")).mappings().all()
    return {r["relname"]: dict(r) for r in rows}


def run_counts(engine) -> dict:
    import sqlalchemy as sa

    with engine.connect() as conn:
        by_status = dict(conn.execute(sa.text("SELECT status, count(*) FROM runs GROUP BY status")).all())
        partial = conn.execute(sa.text(
            "SELECT count(*) FROM run_tags WHERE key = 'racing/outcome' AND value = 'partial'")).scalar()
        events = conn.execute(sa.text("SELECT count(*) FROM event_logs")).scalar()
    return {"runs": sum(by_status.values()), "failed": by_status.get("FAILURE", 0), "partial": partial,
            "event_logs_rows": events}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--days", type=int, default=60)
    parser.add_argument("--runs-per-day", type=int, default=9200)
    parser.add_argument("--failed-share", type=float, default=0.02)
    parser.add_argument("--maintenance-share", type=float, default=0.8)
    parser.add_argument("--failed-retention-days", type=int, default=None, help="RUN_RETENTION_FAILED_DAYS (unset: forever)")
    parser.add_argument("--reindex-every-days", type=int, default=7,
                        help="the job's reindex_every_days: REINDEX TABLE CONCURRENTLY after that night's cleanup (0: never)")
    parser.add_argument("--history-days", type=int, default=None, help="MAINTENANCE_HISTORY_DAYS (unset: forever)")
    parser.add_argument("--export-bytes-per-day", type=float, default=DEFAULT_EXPORT_BYTES_PER_DAY)
    parser.add_argument("--writers", type=int, default=4, help="threads writing runs side by side")
    parser.add_argument("--json", type=Path, default=None, help="write the per-day rows and the summary here")
    parser.add_argument("--data-dir", type=Path, default=None, help="Postgres data folder (default: a temporary one)")
    args = parser.parse_args()
    plan = day_plan(args.runs_per_day, args.failed_share)

    os.environ.setdefault("DAGSTER_STORAGE_KEEP_CONNECTIONS", "1")  # one kept connection per storage, as the daemon
    import dagster as dg
    import sqlalchemy as sa

    from local_stack.embedded_postgres import ensure_database, psycopg2_url, start_embedded_postgres
    from maintenance_jobs.database.migrate import upgrade
    from orchestration_core.audit.bulk_delete import reindex_tables, vacuum_after_delete
    from orchestration_core.audit.cleanup import prune_successful_runs, reindex_due
    from orchestration_core.audit.execution_history import EXECUTION_HISTORY_TABLE, prune_execution_history

    with tempfile.TemporaryDirectory() as tmp:
        data_dir = args.data_dir or Path(tmp) / "pg"
        server = start_embedded_postgres(data_dir, delete_on_exit=args.data_dir is None)
        server_url = psycopg2_url(server.get_uri())
        dagster_url = ensure_database(server_url, f"month_{uuid.uuid4().hex[:6]}")
        registry_url = ensure_database(server_url, f"registry_{uuid.uuid4().hex[:6]}")
        upgrade(registry_url)
        dagster_engine = sa.create_engine(dagster_url, poolclass=sa.pool.NullPool)
        registry_engine = sa.create_engine(registry_url, poolclass=sa.pool.NullPool)
        storage = {"custom": {"module": "orchestration_core.pooled_storage", "class": "PooledPostgresStorage",
                              "config": {"postgres_url": dagster_url}}}
        rows: list[dict] = []
        with ExitStack() as stack:
            instances = [stack.enter_context(dg.instance_for_test(overrides={"storage": storage}))
                         for _ in range(max(1, args.writers))]
            instance = instances[0]
            fab = Fabricator(instances)
            print(f"plan per day: {plan.total} runs ({plan.successes} successes, {plan.failed} failed, {plan.partial} "
                  f"partial, {plan.recoveries} recoveries); events per run: {fab.events_per_run[True]} success, "
                  f"{fab.events_per_run[False]} failure", flush=True)
            start = (datetime.now(UTC) - args.days * DAY).replace(hour=0, minute=0, second=0, microsecond=0)
            seq = [0]
            print("day | dagster tables | runs kept (problems) | event_logs rows | dead after delete / threshold |"
                  " dead after VACUUM | history | fabricate s | cleanup s | vacuum s", flush=True)
            for day in range(args.days):
                day_start = start + day * DAY
                t0 = time.perf_counter()
                specs = day_specs(day_start, plan, args.maintenance_share, seq)
                fab.write(specs)
                record_history(registry_engine, specs)
                fabricate_s = time.perf_counter() - t0
                now = day_start + DAY + timedelta(hours=2)  # the 02:00 cleanup after the day
                t0 = time.perf_counter()
                report = prune_successful_runs(instance, SUCCESS_RETENTION_DAYS,
                                               failed_older_than_days=args.failed_retention_days, now=now, vacuum=False)
                cleanup_s = time.perf_counter() - t0
                force_stats_flush(instance)
                after_delete = table_stats(dagster_engine)
                vacuum_s = None
                if report.deleted:
                    vacuum_s = vacuum_after_delete(instance)
                    force_stats_flush(instance)
                reindex_s = None
                if report.deleted and reindex_due(now.date(), args.reindex_every_days):
                    reindex_s = reindex_tables(instance)
                if args.history_days:
                    prune_execution_history(registry_url, args.history_days, now=now)
                after_vacuum = table_stats(dagster_engine)
                history = table_stats(registry_engine)[EXECUTION_HISTORY_TABLE]
                counts = run_counts(dagster_engine)
                events = after_delete["event_logs"]
                row = {
                    "day": day, "dagster_bytes": sum(t["bytes"] for t in after_vacuum.values()),
                    "runs": counts["runs"], "problem_runs": counts["failed"] + counts["partial"],
                    "event_logs_rows": counts["event_logs_rows"], "deleted": report.deleted,
                    "event_logs_dead_after_delete": events["n_dead_tup"],
                    "event_logs_autovacuum_threshold": autovacuum_threshold(events["n_live_tup"]),
                    "event_logs_dead_after_vacuum": after_vacuum["event_logs"]["n_dead_tup"],
                    "runs_dead_after_delete": after_delete["runs"]["n_dead_tup"],
                    "runs_dead_after_vacuum": after_vacuum["runs"]["n_dead_tup"],
                    "history_bytes": history["bytes"], "history_rows": history["n_live_tup"],
                    "fabricate_s": round(fabricate_s, 1), "cleanup_s": round(cleanup_s, 1),
                    "vacuum_s": None if vacuum_s is None else round(vacuum_s, 1),
                    "reindex_s": None if reindex_s is None else round(reindex_s, 1),
                }
                rows.append(row)
                print(f"{day + 1:3d} | {mib(row['dagster_bytes'])} | {row['runs']:,} ({row['problem_runs']:,}) | "
                      f"{row['event_logs_rows']:,} | {row['event_logs_dead_after_delete']:,} / "
                      f"{row['event_logs_autovacuum_threshold']:,} | {row['event_logs_dead_after_vacuum']:,} | "
                      f"{mib(row['history_bytes'])} | {fabricate_s:.0f} | {cleanup_s:.1f} | "
                      f"{'-' if vacuum_s is None else f'{vacuum_s:.1f}'}"
                      f"{'' if reindex_s is None else f' | reindex {reindex_s:.1f} s'}", flush=True)
                if args.json:
                    _write(args.json, args, plan, fab, rows, None)
            summary = summarize(rows, SUCCESS_RETENTION_DAYS, args.export_bytes_per_day)
        dagster_engine.dispose()
        registry_engine.dispose()
        server.cleanup()
    yearly = summary["yearly_growth_bytes"]
    print(f"a day of runs while kept: {mib(summary['bytes_per_day_all_runs'])} (successes "
          f"{mib(summary['bytes_per_day_successes_while_kept'])}); success plateau "
          f"{mib(summary['success_plateau_bytes'])}; ceiling of the Dagster tables {mib(summary['ceiling_bytes'])}; "
          f"kept on purpose {mib(summary['kept_on_purpose_bytes_per_day'])}/day "
          f"({summary['problem_runs_per_day']} problem runs/day); yearly growth: problem runs "
          f"{mib(yearly['problem_runs'])}, execution history {mib(yearly['execution_history'])}, exports "
          f"{mib(yearly['exports'])}", flush=True)
    if args.json:
        _write(args.json, args, plan, fab, rows, summary)


def _write(path: Path, args, plan: DayPlan, fab: Fabricator, rows: list[dict], summary: dict | None) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    data = {"args": {k: str(v) if isinstance(v, Path) else v for k, v in vars(args).items()}, "plan": asdict(plan),
            "events_per_run": {"success": fab.events_per_run[True], "failure": fab.events_per_run[False]},
            "days": rows, "summary": summary}
    path.write_text(json.dumps(data, indent=1))


if __name__ == "__main__":
    main()
