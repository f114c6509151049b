"""Benchmark: morning_scrape wall time, threaded versus strictly sequential, and API requests versus the minimum.

The simulated feed answers every request after 100 ms of injected latency; 60 combinations (3 categories x 10
countries x 2 days). Both variants run the same job through `execute_job` against Postgres run storage and a
Postgres race database, in one process, alternating, so the ratio is measured side by side. The feed is `racing sim`
in its own process, as the TAB API is remote in production: in the benchmark's process its JSON generation would
compete for the run's GIL.

Two references bracket the job: the same scrape code without Dagster (a plain thread pool), and Dagster's floor, a
job of the same shape (60 mapped steps, the same types and output metadata) whose steps do no I/O at all. The floor
is what one step per combination costs in Dagster on this machine before any HTTP or database work; it also runs on
an in-memory instance, the same executor, where no event is written anywhere.

    .venv/bin/python bench/morning_scrape.py [--repeats 3] [--threads 8]
"""

from __future__ import annotations

import argparse
import atexit
import datetime as dt
import json
import math
import os
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import dagster as dg  # noqa: E402

from orchestration_core.settings import racing_timezone  # noqa: E402
from racing_orchestration.ingestion.combinations import (  # noqa: E402
    CombinationResult,
    ScrapeCombination,
    plan_combinations,
    scrape_days,
)
from racing_orchestration.threaded_executor import threadpool_executor  # noqa: E402

COUNTRIES = ["NZ", "AUS", "UK", "IRE", "FR", "USA", "SAF", "JPN", "SGP", "HK"]
LATENCY_MS = 100.0


@dg.op(out=dg.DynamicOut(ScrapeCombination))
def plan_nothing():
    days = [dt.date(2026, 1, 1), dt.date(2026, 1, 2)]
    for combination in plan_combinations(["T", "H", "G"], COUNTRIES, days):
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


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--threads", type=int, default=8)
    args = parser.parse_args()

    from local_stack.embedded_postgres import ensure_database, psycopg2_url, start_embedded_postgres
    from racing_orchestration.race_db import upgrade
    from local_stack.stack import free_port, wait_for_http

    server = start_embedded_postgres(Path(tempfile.mkdtemp(prefix="bench-pg-")) / "pgdata", delete_on_exit=True)
    server_url = psycopg2_url(server.get_uri())
    racing_url = ensure_database(server_url, "racing")
    upgrade(racing_url)
    dagster_url = ensure_database(server_url, "dagster")
    port = free_port()
    feed = subprocess.Popen([str(Path(sys.executable).parent / "racing"), "sim", "--port", str(port), "--seed", "11",
                             "--latency-ms", str(LATENCY_MS)], stdout=subprocess.DEVNULL)
    atexit.register(feed.kill)  # also when the benchmark fails: an orphaned feed would hold the port and stderr
    feed_url = f"http://127.0.0.1:{port}"
    wait_for_http(f"{feed_url}/_sim/stats", 60, feed)

    def served() -> int:
        with urllib.request.urlopen(f"{feed_url}/_sim/stats") as response:
            return json.load(response)["total"]

    base_url = f"{feed_url}/affiliates/v1/racing"
    os.environ["RACING_DATABASE_URL"] = racing_url
    os.environ["TAB_API_BASE_URL"] = base_url

    from racing_orchestration.ingestion.runner import run_morning_scrape
    from racing_orchestration.tab.client import TabClient

    # Today and tomorrow in the racing timezone, as the scheduled job picks them (the machine's local date is a day
    # off from NZ's for half of every UTC day).
    days = scrape_days(dt.datetime.now(dt.UTC), racing_timezone())
    page_limit = TabClient.model_fields["page_limit"].default
    timings: dict[str, list[float]] = {"threaded": [], "sequential": []}
    requests: dict[str, list[int]] = {"threaded": [], "sequential": []}
    minimum = None
    # The project's instance settings that shape a run (python_logs), on this benchmark's Postgres.
    import yaml

    project = yaml.safe_load((Path(__file__).resolve().parent.parent / "dagster.yaml").read_text())
    overrides = {"storage": {"postgres": {"postgres_url": dagster_url}}, "python_logs": project["python_logs"]}
    with dg.instance_for_test(overrides=overrides) as instance:
        for _ in range(args.repeats):
            for name, threads in (("threaded", args.threads), ("sequential", 1)):
                before = served()
                run = run_morning_scrape(instance, days, countries=COUNTRIES, max_concurrent=threads)
                assert run.success and run.outcome == "success", run
                assert len(run.results) == 60, len(run.results)
                timings[name].append(run.seconds)
                requests[name].append(served() - before)
                # Fewest requests possible: one page per combination, more only for combinations past a page.
                minimum = sum(max(1, math.ceil(r.meetings / page_limit)) for r in run.results)
        # The same 60 combinations through the scrape's own code without Dagster (scrape_combination_once in a
        # thread pool): separates the I/O the threads overlap from Dagster's per-step bookkeeping.
        from concurrent.futures import ThreadPoolExecutor

        from racing_orchestration.ingestion.scrape import scrape_combination_once
        from racing_orchestration.race_db.resource import RaceDatabase

        client = TabClient(base_url=base_url)
        race_db = RaceDatabase(url=racing_url)
        combinations = plan_combinations(["T", "H", "G"], COUNTRIES, days)
        for _ in range(args.repeats):
            for name, threads in (("no-dagster threaded", args.threads), ("no-dagster sequential", 1)):
                started = time.monotonic()
                with ThreadPoolExecutor(threads) as pool:
                    list(pool.map(lambda c: scrape_combination_once(client, race_db, c, None), combinations))
                timings.setdefault(name, []).append(time.monotonic() - started)
        race_db.dispose()
        # The floor on this Postgres and, with only the storage changed, on an in-memory instance that stores nothing.
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
    feed.terminate()
    feed.wait(timeout=20)
    server.cleanup()

    threaded, sequential = statistics.median(timings["threaded"]), statistics.median(timings["sequential"])
    reqs = statistics.median(requests["threaded"])
    ideal = reqs * LATENCY_MS / 1000 / args.threads
    print(f"machine: {os.cpu_count()} cores, {_cpu_model()}")
    print(f"combinations: 60, latency {LATENCY_MS:.0f} ms, threads {args.threads}, repeats {args.repeats}")
    print(f"threaded   median {threaded:6.2f} s  runs {[round(t, 2) for t in timings['threaded']]}")
    print(f"sequential median {sequential:6.2f} s  runs {[round(t, 2) for t in timings['sequential']]}")
    print(f"speed-up {sequential / threaded:.1f}x (goal >= 8x)")
    print(f"ideal (requests x latency / threads) {ideal:.2f} s; threaded / ideal = {threaded / ideal:.1f}x (goal <= 1.5x)")
    print(f"API requests per run {reqs:.0f}, minimum {minimum} (sequential {statistics.median(requests['sequential']):.0f})")
    bare_threaded = statistics.median(timings["no-dagster threaded"])
    bare_sequential = statistics.median(timings["no-dagster sequential"])
    print(f"without Dagster: threaded {bare_threaded:.2f} s, sequential {bare_sequential:.2f} s, "
          f"speed-up {bare_sequential / bare_threaded:.1f}x, threaded / ideal = {bare_threaded / ideal:.1f}x")
    print(f"Dagster per-step overhead (sequential job - sequential bare) / 60 = "
          f"{(sequential - bare_sequential) / 60 * 1000:.0f} ms")
    floor_threaded = statistics.median(timings["floor threaded"])
    floor_sequential = statistics.median(timings["floor sequential"])
    print(f"Dagster floor (same job shape, steps without I/O): {args.threads} threads {floor_threaded:.2f} s, "
          f"1 thread {floor_sequential:.2f} s; the goal's budget (1.5 x ideal) is {1.5 * ideal:.2f} s, "
          f"floor / budget = {floor_threaded / (1.5 * ideal):.1f}x")
    print(f"Dagster floor with nothing stored (in-memory instance, {args.threads} threads): "
          f"{statistics.median(timings['floor in memory']):.2f} s")
    return 0


def _cpu_model() -> str:
    for line in Path("/proc/cpuinfo").read_text().splitlines():
        if line.startswith("model name"):
            return line.split(":", 1)[1].strip()
    return "unknown CPU"


if __name__ == "__main__":
    sys.exit(main())
