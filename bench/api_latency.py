"""Benchmark: control API latency with 100k runs in Dagster storage and 100k rows of execution history, 50 concurrent
clients and one client; optionally today's code (a git ref) served side by side on the same data in the same run.

Builds an embedded Postgres with 100,000 runs (10% maintenance-tagged, created over 30 days) inserted in bulk
into Dagster's `runs`/`run_tags` tables (orchestration_core/dagster_schema.py; the rows `instance.add_run` writes,
minus one round trip per run) and `--history-rows` rows of the maintenance execution history (`task_executions`:
the ended maintenance runs still in storage plus older ones whose runs retention deleted, over two years), with the
history caught up (its recorded-through mark set; the newest runs still going). It serves `python -m control_api`
in its own process and measures p50/p99 latency and throughput of `GET /executions?limit=20`, a status-filtered
page, a deep page (cursor) and `GET /stats`.

    .venv/bin/python bench/api_latency.py [--runs 100000] [--history-rows 100000] [--clients 50] [--requests 1500]
                                          [--workers 1 2] [--cache 0 1] [--baseline REF]

`--baseline REF` checks REF out into a temporary git worktree and serves its API too, against the same run storage
(and a registry of its own, migrated by that code), so "before" and "after" are measured on one machine in one run:
both servers run at once and each endpoint's loads alternate between them (`--rounds`), so a change in the machine's
load between two measurements does not land on one version only.
Three loads per endpoint and worker count: 1 client (sequential), `--clients` connections in a closed loop (each sends
its next request when the answer arrives: throughput at saturation), and the same number of clients paced at one
request per `--pace` seconds each (dashboards polling: latency below saturation).
"""

from __future__ import annotations

import argparse
import asyncio
import datetime as dt
import os
import random
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

KEY = "bench-key-0123456789"
TASKS = [("backup_docker_configs_daily", "scheduler"), ("sync_fastapi_docs_monthly", "docs"),
         ("test_example_task", "scheduler"), ("disk_usage", "infra")]


def insert_runs(instance, count: int, maintenance_share: float, seed: int = 7) -> list[dict]:
    """Bulk-insert `count` finished/queued runs with their tags, oldest first (ids grow with created time); returns
    the ended maintenance runs as execution-history rows."""
    import dagster as dg
    import sqlalchemy as sa
    from dagster import serialize_value

    from orchestration_core.dagster_schema import run_tags, runs

    rng = random.Random(seed)
    now = dt.datetime.now(dt.UTC).replace(tzinfo=None)
    start = now - dt.timedelta(days=30)
    step = dt.timedelta(days=30) / count
    statuses = [dg.DagsterRunStatus.SUCCESS] * 87 + [dg.DagsterRunStatus.FAILURE] * 10 + \
               [dg.DagsterRunStatus.CANCELED] * 3
    batch_runs, batch_tags, history = [], [], []
    with instance.run_storage.connect() as conn:
        for i in range(count):
            created = start + step * i
            maintenance = rng.random() < maintenance_share
            # Only the newest runs are still going (the queue limits active runs to a few dozen).
            status = dg.DagsterRunStatus.STARTED if i >= count - 20 else rng.choice(statuses)
            if maintenance:
                task, service = rng.choice(TASKS)
                job = "example_executor"
                tags = {"orchestration/kind": "maintenance", "maintenance/task": task, "maintenance/service": service,
                        "maintenance/executor": "example_executor", "maintenance/triggered_by": "scheduler",
                        "maintenance/priority": "50"}
            else:
                job = rng.choice(["morning_scrape", "pre_race_t60", "pre_race_t15", "post_race_t5"])
                tags = {"orchestration/kind": "racing", "racing/outcome": "success" if status.value == "SUCCESS"
                        else "failed", "racing/items_processed": str(rng.randint(1, 60))}
            run_id = str(uuid.UUID(int=rng.getrandbits(128), version=4))
            run = dg.DagsterRun(job_name=job, run_id=run_id, status=status, tags=tags)
            began = created.replace(tzinfo=dt.UTC).timestamp() + 1
            ended = None if status == dg.DagsterRunStatus.STARTED else began + rng.uniform(1, 300)
            batch_runs.append({"run_id": run_id, "pipeline_name": job, "status": status.value,
                               "run_body": serialize_value(run), "create_timestamp": created,
                               "update_timestamp": created, "start_time": began, "end_time": ended})
            batch_tags += [{"run_id": run_id, "key": k, "value": v} for k, v in tags.items()]
            if maintenance and ended is not None:
                history.append(history_row(run_id, task, service, status.value, created.replace(tzinfo=dt.UTC),
                                           began, ended))
            if len(batch_runs) == 5000 or i == count - 1:
                conn.execute(sa.insert(runs), batch_runs)
                conn.execute(sa.insert(run_tags), batch_tags)
                batch_runs, batch_tags = [], []
        conn.execute(sa.text("ANALYZE runs; ANALYZE run_tags"))
    return history


HISTORY_STATUS = {"SUCCESS": "success", "FAILURE": "failed", "CANCELED": "canceled"}


def history_row(run_id: str, task: str, service: str, dagster_status: str, triggered: dt.datetime, began: float,
                ended: float) -> dict:
    from maintenance_jobs.execution_history.summary import execution_id

    status = HISTORY_STATUS[dagster_status]
    return {"id": execution_id(run_id), "run_id": run_id, "task_id": 1 + [t for t, _ in TASKS].index(task),
            "task_name": task, "service": service, "executor": "example_executor", "priority": 50, "status": status,
            "triggered_by": "scheduler", "triggered_at": triggered,
            "started_at": dt.datetime.fromtimestamp(began, dt.UTC),
            "completed_at": dt.datetime.fromtimestamp(ended, dt.UTC),
            "duration_seconds": round(ended - began, 3), "output": "Example task completed" if status == "success"
            else None, "error": None if status == "success" else "boom", "retry_count": 0,
            "metadata": {"message": "Example task completed", "delay_seconds": 2}, "scheduled_for": None,
            "parent_run_id": None, "job_name": "example_executor", "dagster_status": dagster_status}


def insert_history(registry_url: str, in_storage: list[dict], total: int, seed: int = 11) -> None:
    """The history of an install that has run for two years: the ended maintenance runs still in storage, and older
    rows whose runs retention deleted, up to `total`; then the recorded-through mark (the history has caught up)."""
    import sqlalchemy as sa

    from maintenance_jobs.database.tables import task_executions
    from maintenance_jobs.execution_history.store import advance_recorded_through

    rng = random.Random(seed)
    engine = sa.create_engine(registry_url)
    oldest_in_storage = min(row["triggered_at"] for row in in_storage)
    older = max(0, total - len(in_storage))
    step = dt.timedelta(days=730) / max(older, 1)
    rows = list(in_storage)
    statuses = ["SUCCESS"] * 87 + ["FAILURE"] * 10 + ["CANCELED"] * 3
    for i in range(older):
        task, service = rng.choice(TASKS)
        triggered = oldest_in_storage - dt.timedelta(days=730) + step * i
        began = triggered.timestamp() + 1
        rows.append(history_row(str(uuid.UUID(int=rng.getrandbits(128), version=4)), task, service,
                                rng.choice(statuses), triggered, began, began + rng.uniform(1, 300)))
    with engine.begin() as conn:
        for start in range(0, len(rows), 5000):
            conn.execute(sa.insert(task_executions), rows[start:start + 5000])
        conn.execute(sa.text("ANALYZE task_executions"))
    advance_recorded_through(engine, dt.datetime.now(dt.UTC) - dt.timedelta(minutes=5))
    engine.dispose()


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(round(q / 100 * (len(ordered) - 1))))]


class Connection:
    """One keep-alive HTTP/1.1 connection sending the same GET: a minimal client on asyncio streams (httpx costs ~1 ms
    of CPU per request, which on 2 cores would be taken from the server under test)."""

    def __init__(self, base: str, path: str) -> None:
        self.host, port = base.removeprefix("http://").split(":")
        self.port = int(port)
        self.request = f"GET {path} HTTP/1.1\r\nHost: {self.host}\r\nAuthorization: Bearer {KEY}\r\n\r\n".encode()
        self.latencies: list[float] = []
        self.connecting: list[bool] = []  # per latency: whether that request also opened the connection
        self.errors = 0
        self._streams: tuple[asyncio.StreamReader, asyncio.StreamWriter] | None = None

    async def get(self) -> None:
        """Send the request, read the whole answer, record its latency; a failure is counted and reconnects."""
        began = time.perf_counter()
        self.connecting.append(self._streams is None)
        try:
            if self._streams is None:
                self._streams = await asyncio.open_connection(self.host, self.port)
            reader, writer = self._streams
            writer.write(self.request)
            await writer.drain()
            head = await reader.readuntil(b"\r\n\r\n")
            length = next(int(line.split(b":", 1)[1]) for line in head.split(b"\r\n")
                          if line.lower().startswith(b"content-length:"))
            await reader.readexactly(length)
            self.errors += int(head.split(b" ", 2)[1]) != 200
        except (OSError, asyncio.IncompleteReadError, ValueError, StopIteration):
            self.errors += 1  # counted, not fatal: the next request reconnects
            self.close()
        self.latencies.append((time.perf_counter() - began) * 1000)

    def close(self) -> None:
        if self._streams is not None:
            self._streams[1].close()
            self._streams = None


def _results(connections: list[Connection]) -> tuple[list[float], int]:
    for connection in connections:
        connection.close()
    return [ms for c in connections for ms in c.latencies], sum(c.errors for c in connections)


def _open_connection_latencies(connections: list[Connection]) -> list[float]:
    """The latencies of requests sent on an already open connection: without the 50 connects of a load's start."""
    return [ms for c in connections for ms, connecting in zip(c.latencies, c.connecting) if not connecting]


async def load(base: str, path: str, clients: int, total: int) -> tuple[list[float], float, int, list[float]]:
    """`clients` connections, each sending its next request as soon as the previous answer arrived (closed loop):
    latencies, requests per second, errors, and the latencies of the requests that did not open their connection."""
    connections = [Connection(base, path) for _ in range(clients)]
    remaining = total

    async def worker(connection: Connection) -> None:
        nonlocal remaining
        while remaining > 0:
            remaining -= 1
            await connection.get()

    began = time.perf_counter()
    await asyncio.gather(*(worker(c) for c in connections))
    elapsed = time.perf_counter() - began
    latencies, errors = _results(connections)
    return latencies, len(latencies) / elapsed, errors, _open_connection_latencies(connections)


async def paced(base: str, path: str, clients: int, interval: float, seconds: float) -> tuple[list[float], int]:
    """`clients` connections, each sending one request every `interval` s (random phase): dashboards polling."""
    connections = [Connection(base, path) for _ in range(clients)]
    loop = asyncio.get_running_loop()
    end = loop.time() + seconds

    async def worker(connection: Connection) -> None:
        due = loop.time() + random.uniform(0, interval)
        while due < end:
            await asyncio.sleep(max(0.0, due - loop.time()))
            await connection.get()
            due += interval

    await asyncio.gather(*(worker(c) for c in connections))
    return _results(connections)


def bench_storage(prefix: str) -> tuple:
    """An embedded Postgres (deleted on exit) holding a Dagster storage and a migrated task registry: the server, a
    DAGSTER_HOME using that storage, and the registry's URL (also bench/security_probe.py's)."""
    from local_stack.embedded_postgres import ensure_database, psycopg2_url, start_embedded_postgres
    from maintenance_jobs.database.migrate import upgrade

    work = Path(tempfile.mkdtemp(prefix=prefix))
    server = start_embedded_postgres(work / "pgdata", delete_on_exit=True)
    server_url = psycopg2_url(server.get_uri())
    dagster_url = ensure_database(server_url, "dagster")
    registry_url = ensure_database(server_url, "maintenance")
    upgrade(registry_url)
    home = work / "dagster_home"
    home.mkdir()
    (home / "dagster.yaml").write_text(
        f"storage:\n  postgres:\n    postgres_url: {dagster_url}\ntelemetry:\n  enabled: false\n")
    return server, home, registry_url


def dagster_url_of(home: Path) -> str:
    """The storage database of the bench's dagster.yaml: the API reads it as DAGSTER_POSTGRES_URL (by SQL)."""
    import yaml

    return yaml.safe_load((home / "dagster.yaml").read_text())["storage"]["postgres"]["postgres_url"]


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=100_000)
    parser.add_argument("--clients", type=int, default=50)
    parser.add_argument("--requests", type=int, default=1500, help="requests per endpoint under concurrency")
    parser.add_argument("--single", type=int, default=200, help="sequential requests per endpoint (1 client)")
    parser.add_argument("--workers", type=int, nargs="+", default=[1, 2], help="API worker processes, one run each")
    parser.add_argument("--cache", type=float, nargs="+", default=[0.0, 1.0],
                        help="MAINTENANCE_API_CACHE_SECONDS values, one run each (0: no response cache)")
    parser.add_argument("--pace", type=float, default=1.0, help="paced load: seconds between a client's requests")
    parser.add_argument("--paced-seconds", type=float, default=20.0)
    parser.add_argument("--history-rows", type=int, default=100_000, help="rows of execution history (0: none)")
    parser.add_argument("--baseline", metavar="REF", help="also serve this git ref's API on the same data")
    parser.add_argument("--rounds", type=int, default=2,
                        help="each endpoint's loads are split in this many rounds, the versions alternating")
    args = parser.parse_args()

    import dagster as dg

    from local_stack.embedded_postgres import ensure_database, psycopg2_url

    server, home, registry_url = bench_storage("bench-api-")
    work = home.parent
    server_url = psycopg2_url(server.get_uri())
    began = time.perf_counter()
    with dg.DagsterInstance.from_config(str(home)) as instance:
        in_storage = insert_runs(instance, args.runs, 0.10)
        total = instance.get_runs_count()
    print(f"inserted {total} runs in {time.perf_counter() - began:.1f} s", flush=True)
    if args.history_rows:
        began = time.perf_counter()
        insert_history(registry_url, in_storage, args.history_rows)
        print(f"inserted {max(args.history_rows, len(in_storage))} history rows in {time.perf_counter() - began:.1f} s",
              flush=True)

    versions = {"this tree": (REPO, registry_url)}
    baseline_tree = None
    if args.baseline:
        baseline_tree = work / "baseline"
        subprocess.run(["git", "-C", str(REPO), "worktree", "add", "--detach", str(baseline_tree), args.baseline],
                       check=True, capture_output=True)
        commit = subprocess.run(["git", "-C", str(baseline_tree), "rev-parse", "--short", "HEAD"], check=True,
                                capture_output=True, text=True).stdout.strip()
        # Its own registry, migrated by its own code (it does not know this tree's migrations).
        versions = {f"{args.baseline} ({commit})": (baseline_tree, ensure_database(server_url, "maintenance_base")),
                    **versions}
    rows = []
    try:
        for cache in args.cache:
            for workers in args.workers:
                rows += measure(args, home, versions, workers, cache)
    finally:
        if baseline_tree is not None:
            subprocess.run(["git", "-C", str(REPO), "worktree", "remove", "--force", str(baseline_tree)], check=False)
    cpu = next((line.split(":", 1)[1].strip() for line in open("/proc/cpuinfo") if line.startswith("model name")), "?")
    print(f"\nMachine: {os.cpu_count()} cores, {cpu}; load average {os.getloadavg()[0]:.1f} at the end.")
    print(f"{total:,} runs in storage ({args.runs // 10:,} maintenance), {args.history_rows:,} rows of execution "
          f"history; {args.clients} concurrent clients "
          f"(closed loop), {args.requests} requests per endpoint; 1 client: {args.single} sequential requests; "
          f"paced: {args.clients} clients each sending one request every {args.pace} s for {args.paced_seconds} s.\n")
    print(f"| code | cache | workers | endpoint | 1 client p50 | 1 client p99 | {args.clients} clients p50 "
          f"| {args.clients} clients p99 | {args.clients} clients p99, open connections "
          f"| {args.clients} clients req/s | paced p50 | paced p99 | errors |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|---|")
    for version, cache, workers, label, s50, s99, m50, m99, m99_open, rps, p50, p99, errors in rows:
        print(f"| {version} | {cache:g} s | {workers} | `{label}` | {s50:.1f} ms | {s99:.1f} ms | {m50:.1f} ms "
              f"| {m99:.1f} ms | {m99_open:.1f} ms | {rps:.0f} | {p50:.1f} ms | {p99:.1f} ms | {errors} |")
    return 0


def serve(home: Path, code: Path, registry_url: str, workers: int, cache: float) -> tuple[subprocess.Popen, str]:
    """`python -m control_api` of the tree `code` on a free port; returns the process and its base URL."""
    from local_stack.stack import free_port, wait_for_http

    port = free_port()
    env = {**os.environ, "DAGSTER_HOME": str(home), "DAGSTER_POSTGRES_URL": dagster_url_of(home),
           "MAINTENANCE_DATABASE_URL": registry_url, "SCHEDULER_API_KEY": KEY,
           "MAINTENANCE_API_CACHE_SECONDS": str(cache), "PYTHONPATH": str(code)}
    api = subprocess.Popen([sys.executable, "-m", "control_api", "--port", str(port), "--log-level",
                            "warning", "--workers", str(workers)], env=env, cwd=code)
    base = f"http://127.0.0.1:{port}"
    wait_for_http(f"{base}/health", 60, api)
    return api, base


def endpoints(base: str) -> dict[str, str]:
    """Label -> path of each endpoint measured; the deep page's cursor is found by following the Link headers."""
    import httpx

    headers = {"Authorization": f"Bearer {KEY}"}
    page = httpx.get(f"{base}/executions", params={"limit": 20}, headers=headers)
    for _ in range(50):  # a page ~1,000 executions deep, following the Link headers
        following = httpx.get(f"{base}{page.links['next']['url']}", headers=headers)
        if "next" not in following.links:  # a small data set: the deepest page that has a next one
            break
        page = following
    cursor = dict(httpx.URL(page.links["next"]["url"]).params)["cursor"]
    return {
        "/executions?limit=20": "/executions?limit=20",
        "/executions?limit=20&status=failed": "/executions?limit=20&status=failed",
        "/executions?limit=20&cursor=<page 51>": f"/executions?limit=20&cursor={cursor}",
        "/stats": "/stats",
    }


def measure(args: argparse.Namespace, home: Path, versions: dict[str, tuple[Path, str]], workers: int,
            cache: float) -> list[tuple]:
    """Serve every version's API at once with `workers` processes each, and load each endpoint of each version in
    turn, `--rounds` times in alternating order (so a change in the machine's load between them hits both alike):
    1 client, N clients closed loop, paced."""
    servers = {}
    try:
        for version, (code, registry_url) in versions.items():
            servers[version] = serve(home, code, registry_url, workers, cache)
        paths = {version: endpoints(base) for version, (_, base) in servers.items()}
        for version, (_, base) in servers.items():  # warm up every worker: imports, pools, Postgres caches
            for path in paths[version].values():
                asyncio.run(load(base, path, 2 * workers, 20 * workers))
        samples: dict[tuple[str, str], dict] = {}
        order = list(servers)
        for label in paths[order[0]]:
            for round_number in range(args.rounds):
                for version in order if round_number % 2 == 0 else order[::-1]:
                    base, path = servers[version][1], paths[version][label]
                    got = samples.setdefault((version, label), {"single": [], "many": [], "elapsed": 0.0,
                                                                 "steady": [], "errors": 0, "many_open": []})
                    single, _, single_errors, _ = asyncio.run(load(base, path, 1, args.single // args.rounds))
                    began = time.perf_counter()
                    many, _, errors, many_open = asyncio.run(load(base, path, args.clients, args.requests // args.rounds))
                    got["elapsed"] += time.perf_counter() - began
                    steady, steady_errors = asyncio.run(paced(base, path, args.clients, args.pace,
                                                              args.paced_seconds / args.rounds))
                    got["single"] += single
                    got["many"] += many
                    got["many_open"] += many_open
                    got["steady"] += steady
                    got["errors"] += errors + single_errors + steady_errors
            print(f"cache {cache:g} s, {workers} worker(s) {label}: done", flush=True)
    finally:
        for api, _ in servers.values():
            api.terminate()
            api.wait(timeout=30)
    rows = []
    for version in servers:
        for label in paths[version]:
            got = samples[(version, label)]
            rows.append((version, cache, workers, label, statistics.median(got["single"]),
                         percentile(got["single"], 99), statistics.median(got["many"]), percentile(got["many"], 99),
                         percentile(got["many_open"], 99),
                         len(got["many"]) / got["elapsed"], statistics.median(got["steady"]),
                         percentile(got["steady"], 99), got["errors"]))
    return rows


if __name__ == "__main__":
    sys.exit(main())
