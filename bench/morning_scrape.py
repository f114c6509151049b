"""Benchmark: the morning scrape's executor, side by side: today's thread pool against Dagster's public executors.

Every variant runs the morning scrape against the same simulated feed (`racing sim` in its own process, 100 ms of
injected latency per request, as the TAB API is remote in production) and the same Postgres run storage and race
database, through `execute_job`, alternating within each repeat so the ratios are measured side by side:

- `threadpool`: the real `morning_scrape` job, one step per combination in threads of the run worker (today);
- `multiprocess`: the same graph on `dg.multiprocess_executor`, one process per step forked from a forkserver that
  has preloaded the scrape's modules, as many processes at once as the thread pool has threads;
- `in_process`: the same graph on `dg.in_process_executor`, steps one after another (the floor of concurrency);
- `one_op`: the same per-combination function (`scrape_combination_once`) in a thread pool inside a single op on the
  in-process executor, its per-combination outcomes in the op's output metadata. It loses what a step per
  combination gives: per-combination retries (30 minutes later, without holding the run), a step per combination in
  the UI (status, duration, logs) and re-execution of only the failed combinations.

Per run: wall seconds of `execute_job`, and CPU seconds of the run worker (this process) and of every process it
starts (step processes, the forkserver): RUSAGE_SELF and RUSAGE_CHILDREN, plus each live descendant's own and reaped
children's times, the feed and Postgres excluded. Postgres's CPU (postmaster, its backends) is reported on its own.
Sizes are combinations: 60 is today's 3 categories x 10 countries x 2 days; 240 (4x) is 8 days.

    .venv/bin/python bench/morning_scrape.py [--sizes 60,240] [--repeats 3] [--repeats-4x 2] [--threads 8]
        [--variants threadpool,multiprocess,in_process,one_op] [--references]

`--references` adds the older references at 60 combinations: the scrape code without Dagster (a plain thread pool)
and Dagster's floor, a job of the same shape whose steps do no I/O, on Postgres and on an in-memory instance.
"""

import argparse
import atexit
import datetime as dt
import json
import math
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import dagster as dg  # noqa: E402
import psutil  # noqa: E402

from orchestration_core.run_config_rules import literal_config_schema  # noqa: E402
from orchestration_core.settings import racing_timezone  # noqa: E402
from racing_orchestration.ingestion.combinations import (  # noqa: E402
    CombinationResult,
    ScrapeCombination,
    parse_days,
    plan_combinations,
    scrape_days,
)
from racing_orchestration.ingestion.jobs import ScrapePlanConfig, morning_scrape, summarize_scrape  # noqa: E402
from racing_orchestration.ingestion.scrape import scrape_combination_once  # noqa: E402
from racing_orchestration.race_db.resource import RaceDatabase  # noqa: E402
from racing_orchestration.resources import racing_resources  # noqa: E402
from racing_orchestration.tab.client import TabApiError, TabClient  # noqa: E402
from racing_orchestration.tab.models import TabPayloadError  # noqa: E402
from racing_orchestration.threaded_executor import threadpool_executor  # noqa: E402

CATEGORIES = ["T", "H", "G"]
COUNTRIES = ["NZ", "AUS", "UK", "IRE", "FR", "USA", "SAF", "JPN", "SGP", "HK"]
LATENCY_MS = 100.0
VARIANTS = ("threadpool", "multiprocess", "in_process", "one_op")
# What the forkserver imports once, so that each forked step process starts with the scrape's code and the
# instance's Postgres storage loaded.
PRELOAD_MODULES = [
    "dagster", "dagster_postgres", "racing_orchestration.ingestion.jobs", "racing_orchestration.resources",
]


# --- the jobs: the same graph (or, for one_op, the same per-combination function) on each executor -------------------

def _resolved(job: dg.JobDefinition) -> dg.JobDefinition:
    """The job with the location's resources bound from the environment, as `racing scrape` runs it."""
    return dg.Definitions(jobs=[job], resources=racing_resources()).resolve_job_def(job.name)


def _on_executor(executor_def: dg.ExecutorDefinition) -> dg.JobDefinition:
    return _resolved(morning_scrape.graph.to_job(name="morning_scrape", executor_def=executor_def,
                                                 tags=morning_scrape.tags, description=morning_scrape.description))


def scrape_threadpool() -> dg.JobDefinition:
    return _resolved(morning_scrape)


def scrape_multiprocess() -> dg.JobDefinition:
    return _on_executor(dg.multiprocess_executor)


def scrape_in_process() -> dg.JobDefinition:
    return _on_executor(dg.in_process_executor)


class ScrapeInOneOpConfig(ScrapePlanConfig):
    threads: int = 8


def scrape_or_fail(client: TabClient, race_db: RaceDatabase, combination: ScrapeCombination,
                   run_id: str) -> CombinationResult:
    """One combination as `scrape_combination`'s last attempt ends it: an API error is its `failed` result."""
    try:
        return scrape_combination_once(client, race_db, combination, run_id)
    except (TabApiError, TabPayloadError) as exc:
        return CombinationResult(combination, "failed", error=str(exc), http_status=getattr(exc, "status_code", None))


@dg.op(description="Every combination in a thread pool inside this one op.",
       config_schema=literal_config_schema(ScrapeInOneOpConfig))
def scrape_in_one_op(context: dg.OpExecutionContext, tab_client: TabClient,
                     race_db: RaceDatabase) -> list[CombinationResult]:
    config = ScrapeInOneOpConfig(**context.op_config)
    days = parse_days(config.dates) or scrape_days(dt.datetime.now(dt.UTC), racing_timezone(), config.days_ahead)
    combinations = plan_combinations(config.categories, config.countries, days)
    with ThreadPoolExecutor(config.threads) as pool:
        results = list(pool.map(lambda c: scrape_or_fail(tab_client, race_db, c, context.run_id), combinations))
    # Each combination's outcome, as the per-step output metadata of `scrape_combination` gives it.
    context.add_output_metadata({"combinations": dg.MetadataValue.json({
        r.combination.key: {"status": r.status, "meetings": r.meetings, "races": r.races,
                            "api_requests": r.api_requests, "attempts": r.attempts, "error": r.error or ""}
        for r in results})})
    return results


def scrape_one_op() -> dg.JobDefinition:
    @dg.job(name="morning_scrape_one_op", executor_def=dg.in_process_executor, tags=morning_scrape.tags)
    def morning_scrape_one_op():
        summarize_scrape(scrape_in_one_op())

    return _resolved(morning_scrape_one_op)


JOBS = {"threadpool": scrape_threadpool, "multiprocess": scrape_multiprocess, "in_process": scrape_in_process,
        "one_op": scrape_one_op}


def run_config_for(variant: str, days: list[dt.date], countries: list[str], threads: int) -> dict:
    """Each variant's run config for the same combinations, no retries, `threads` combinations at once."""
    plan = {"dates": [d.isoformat() for d in days], "categories": CATEGORIES, "countries": countries}
    if variant == "one_op":
        return {"ops": {"scrape_in_one_op": {"config": {**plan, "threads": threads}}}}
    config: dict = {"ops": {"plan_scrape_combinations": {"config": plan},
                            "scrape_combination": {"config": {"max_retries": 0}}}}
    if variant == "threadpool":
        config["execution"] = {"config": {"max_concurrent": threads}}
    elif variant == "multiprocess":
        config["execution"] = {"config": {"max_concurrent": threads, "start_method": {
            "forkserver": {"preload_modules": PRELOAD_MODULES}}}}
    return config


def results_of(result, variant: str) -> list[CombinationResult]:
    if variant == "one_op":
        return result.output_for_node("scrape_in_one_op")
    return list(result.output_for_node("scrape_combination").values())


# --- CPU of a process tree -----------------------------------------------------------------------------------------

def tree_cpu_seconds(excluded: set[int]) -> float:
    """CPU of this process, its reaped children, and every live descendant (with the children it reaped) outside
    the `excluded` subtrees: a forkserver's step processes are reaped by the forkserver, not by this process."""
    own, reaped = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    total = own.ru_utime + own.ru_stime + reaped.ru_utime + reaped.ru_stime
    for process in psutil.Process().children(recursive=True):
        try:
            if process.pid in excluded or any(p.pid in excluded for p in process.parents()):
                continue
            times = process.cpu_times()
        except psutil.NoSuchProcess:
            continue
        total += times.user + times.system + times.children_user + times.children_system
    return total


def postgres_cpu_seconds(postmaster: psutil.Process) -> float:
    """The postmaster's CPU, its live backends' and that of the backends it has reaped."""
    total = 0.0
    for process in [postmaster, *postmaster.children(recursive=True)]:
        try:
            times = process.cpu_times()
        except psutil.NoSuchProcess:
            continue
        total += times.user + times.system + times.children_user + times.children_system
    return total


# --- references (--references): the scrape without Dagster, and Dagster's floor --------------------------------------

@dg.op(out=dg.DynamicOut(ScrapeCombination))
def plan_nothing():
    days = [dt.date(2026, 1, 1), dt.date(2026, 1, 2)]
    for combination in plan_combinations(CATEGORIES, COUNTRIES, days):
        yield dg.DynamicOutput(combination, mapping_key=combination.key)


@dg.op
def scrape_nothing(context, combination: ScrapeCombination) -> CombinationResult:
    result = CombinationResult(combination, "empty")
    context.add_output_metadata({"status": result.status, "meetings": 0, "races": 0, "api_requests": 0,
                                 "attempts": 1, "error": ""})
    return result


@dg.op
def summarize_nothing(results: list[CombinationResult]) -> int:
    return len(results)


@dg.job(executor_def=threadpool_executor)
def dagster_floor():
    """morning_scrape's shape with steps that do nothing: Dagster's own cost of 60 mapped steps."""
    summarize_nothing(plan_nothing().map(scrape_nothing).collect())


def run_references(args, instance, base_url: str, racing_url: str, days: list[dt.date]) -> None:
    timings: dict[str, list[float]] = {}
    client = TabClient(base_url=base_url)
    race_db = RaceDatabase(url=racing_url)
    combinations = plan_combinations(CATEGORIES, COUNTRIES, days)
    for _ in range(args.repeats):
        for name, threads in (("no-dagster threaded", args.threads), ("no-dagster sequential", 1)):
            started = time.monotonic()
            with ThreadPoolExecutor(threads) as pool:
                list(pool.map(lambda c: scrape_combination_once(client, race_db, c, None), combinations))
            timings.setdefault(name, []).append(time.monotonic() - started)
    race_db.dispose()
    floor_job = dg.reconstructable(dagster_floor)
    in_memory = dg.DagsterInstance.ephemeral()
    for _ in range(args.repeats):
        for name, threads, floor_instance in (("floor threaded", args.threads, instance),
                                              ("floor sequential", 1, instance),
                                              ("floor in memory", args.threads, in_memory)):
            config = {"execution": {"config": {"max_concurrent": threads}}}
            started = time.monotonic()
            with dg.execute_job(floor_job, instance=floor_instance, run_config=config) as result:
                assert result.success
            timings.setdefault(name, []).append(time.monotonic() - started)
    print("\nreferences at 60 combinations (median wall seconds):")
    for name, values in timings.items():
        print(f"  {name:22} {statistics.median(values):6.2f} s  runs {[round(t, 2) for t in values]}")


# --- the side-by-side run -------------------------------------------------------------------------------------------

def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", default="60,240",
                        help="combinations per run, multiples of 30 (3 categories x 10 countries x N days)")
    parser.add_argument("--repeats", type=int, default=3, help="runs per variant at 60 combinations or fewer")
    parser.add_argument("--repeats-4x", type=int, default=2, help="runs per variant above 60 combinations")
    parser.add_argument("--threads", type=int, default=8,
                        help="thread pool size, multiprocess max_concurrent and one_op's threads")
    parser.add_argument("--variants", default=",".join(VARIANTS), help=f"some of {','.join(VARIANTS)}")
    parser.add_argument("--references", action="store_true", help="also run the no-Dagster and floor references")
    args = parser.parse_args()
    sizes = [int(s) for s in args.sizes.split(",")]
    variants = [v for v in args.variants.split(",") if v]
    if any(s <= 0 or s % 30 for s in sizes):
        parser.error(f"--sizes: each a positive multiple of 30, got {args.sizes}")
    if not variants or set(variants) - set(VARIANTS):
        parser.error(f"--variants: some of {','.join(VARIANTS)}, got {args.variants}")

    from local_stack.embedded_postgres import ensure_database, psycopg2_url, start_embedded_postgres
    from local_stack.stack import free_port, wait_for_http
    from racing_orchestration.race_db import upgrade

    pgdata = Path(tempfile.mkdtemp(prefix="bench-pg-")) / "pgdata"
    server = start_embedded_postgres(pgdata, delete_on_exit=True)
    server_url = psycopg2_url(server.get_uri())
    racing_url = ensure_database(server_url, "racing")
    upgrade(racing_url)
    dagster_url = ensure_database(server_url, "dagster")
    postmaster = psutil.Process(int((pgdata / "postmaster.pid").read_text().split()[0]))
    port = free_port()
    feed = subprocess.Popen([str(Path(sys.executable).parent / "racing"), "sim", "--port", str(port), "--seed", "11",
                             "--latency-ms", str(LATENCY_MS)], stdout=subprocess.DEVNULL)
    atexit.register(feed.kill)  # also when the benchmark fails: an orphaned feed would hold the port and stderr
    feed_url = f"http://127.0.0.1:{port}"
    wait_for_http(f"{feed_url}/_sim/stats", 60, feed)
    excluded = {feed.pid, postmaster.pid}

    def served() -> int:
        with urllib.request.urlopen(f"{feed_url}/_sim/stats") as response:
            return json.load(response)["total"]

    base_url = f"{feed_url}/affiliates/v1/racing"
    # Set before the first run: the forkserver and its step processes inherit the environment they start with.
    os.environ["RACING_DATABASE_URL"] = racing_url
    os.environ["TAB_API_BASE_URL"] = base_url
    page_limit = TabClient.model_fields["page_limit"].default
    recons = {v: dg.reconstructable(JOBS[v]) for v in variants}

    import yaml

    # The project's instance settings that shape a run (python_logs), on this benchmark's Postgres.
    project = yaml.safe_load((Path(__file__).resolve().parent.parent / "dagster.yaml").read_text())
    overrides = {"storage": {"postgres": {"postgres_url": dagster_url}}, "python_logs": project["python_logs"]}
    now = dt.datetime.now(dt.UTC)
    # Wall, CPU (run worker and the processes it starts), Postgres CPU, API requests; per (size, variant).
    figures: dict[tuple[int, str], dict[str, list[float]]] = {}
    minimum: dict[int, int] = {}
    loads: dict[int, tuple[float, float]] = {}

    def run_once(instance, variant: str, days: list[dt.date], countries: list[str]) -> tuple:
        config = run_config_for(variant, days, countries, args.threads)
        requests_before = served()
        cpu_before, db_before = tree_cpu_seconds(excluded), postgres_cpu_seconds(postmaster)
        started = time.monotonic()
        with dg.execute_job(recons[variant], instance=instance, run_config=config, raise_on_error=False) as result:
            wall = time.monotonic() - started
            cpu = tree_cpu_seconds(excluded) - cpu_before
            db = postgres_cpu_seconds(postmaster) - db_before
            assert result.success, (variant, result.run_id)
            results = results_of(result, variant)
        assert len(results) == len(days) * len(CATEGORIES) * len(countries), (variant, len(results))
        assert all(r.status in ("ok", "empty") for r in results), [r for r in results if r.status == "failed"]
        return wall, cpu, db, served() - requests_before, results

    with dg.instance_for_test(overrides=overrides) as instance:
        # One small unmeasured run each: imports, the forkserver's start and first connections are not in a figure.
        for variant in variants:
            run_once(instance, variant, scrape_days(now, racing_timezone(), 0), COUNTRIES[:1])
        for size in sizes:
            days = scrape_days(now, racing_timezone(), size // 30 - 1)
            repeats = args.repeats if size <= 60 else args.repeats_4x
            load_before = os.getloadavg()[0]
            for repeat in range(repeats):
                # Alternating, the order turned each repeat so no variant always follows the same one.
                for variant in variants[repeat % len(variants):] + variants[:repeat % len(variants)]:
                    wall, cpu, db, requests, results = run_once(instance, variant, days, COUNTRIES)
                    row = figures.setdefault((size, variant), {"wall": [], "cpu": [], "db": [], "requests": []})
                    for key, value in (("wall", wall), ("cpu", cpu), ("db", db), ("requests", requests)):
                        row[key].append(value)
                    print(f"  {size:4} {variant:12} wall {wall:6.2f} s  cpu {cpu:6.2f} s  postgres {db:5.2f} s  "
                          f"requests {requests}", flush=True)
                    # Fewest requests possible: one page per combination, more only past a page.
                    minimum[size] = sum(max(1, math.ceil(r.meetings / page_limit)) for r in results)
            loads[size] = (load_before, os.getloadavg()[0])
        if args.references:
            run_references(args, instance, base_url, racing_url, scrape_days(now, racing_timezone(), 1))
    feed.terminate()
    feed.wait(timeout=20)
    server.cleanup()

    print(f"\nmachine: {os.cpu_count()} cores, {psutil.virtual_memory().total / 2**30:.0f} GiB, {_cpu_model()}")
    print(f"latency {LATENCY_MS:.0f} ms, threads / max_concurrent {args.threads}, preload {PRELOAD_MODULES}\n")
    print("| combinations | executor | wall (median) | CPU, worker + steps (median) | Postgres CPU | "
          "wall vs threadpool | CPU vs threadpool | API requests |")
    print("|---|---|---|---|---|---|---|---|")
    for size in sizes:
        base = figures.get((size, "threadpool"))
        for variant in variants:
            row = {key: statistics.median(values) for key, values in figures[(size, variant)].items()}
            ratios = (f"{row['wall'] / statistics.median(base['wall']):.2f}x",
                      f"{row['cpu'] / statistics.median(base['cpu']):.2f}x") if base else ("-", "-")
            print(f"| {size} | {variant} | {row['wall']:.2f} s | {row['cpu']:.2f} s | {row['db']:.2f} s | "
                  f"{ratios[0]} | {ratios[1]} | {row['requests']:.0f} (min {minimum[size]}) |")
    print()
    for size in sizes:
        print(f"{size} combinations: load average {loads[size][0]:.1f} before, {loads[size][1]:.1f} after; runs:")
        for variant in variants:
            row = figures[(size, variant)]
            print(f"  {variant:12} wall {[round(t, 2) for t in row['wall']]} cpu {[round(t, 2) for t in row['cpu']]}")
    return 0


def _cpu_model() -> str:
    for line in Path("/proc/cpuinfo").read_text().splitlines():
        if line.startswith("model name"):
            return line.split(":", 1)[1].strip()
    return "unknown CPU"


if __name__ == "__main__":
    sys.exit(main())
