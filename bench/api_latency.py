"""Benchmark: control API latency with 100k runs in Dagster storage, 50 concurrent clients and one client.

Builds an embedded Postgres with 100,000 runs (10% maintenance-tagged, created over 30 days) inserted in bulk
through Dagster's run tables (`RunsTable`/`RunTagsTable`, the same rows `instance.add_run` writes, minus one
round trip per run), serves `python -m control_api` in its own process, and measures p50/p99 latency and
throughput of `GET /executions?limit=20`, a status-filtered page, a deep page (cursor) and `GET /stats`.

    .venv/bin/python bench/api_latency.py [--runs 100000] [--clients 50] [--requests 1500] [--workers 1 2]

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

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

KEY = "bench-key-0123456789"
TASKS = [("backup_docker_configs_daily", "scheduler"), ("sync_fastapi_docs_monthly", "docs"),
         ("test_example_task", "scheduler"), ("disk_usage", "infra")]


def insert_runs(instance, count: int, maintenance_share: float, seed: int = 7) -> None:
    """Bulk-insert `count` finished/queued runs with their tags, oldest first (ids grow with created time)."""
    import dagster as dg
    import sqlalchemy as sa
    from dagster._core.storage.runs.schema import RunsTable, RunTagsTable
    from dagster._serdes import serialize_value

    rng = random.Random(seed)
    now = dt.datetime.now(dt.UTC).replace(tzinfo=None)
    start = now - dt.timedelta(days=30)
    step = dt.timedelta(days=30) / count
    statuses = [dg.DagsterRunStatus.SUCCESS] * 87 + [dg.DagsterRunStatus.FAILURE] * 10 + \
               [dg.DagsterRunStatus.CANCELED] * 3
    batch_runs, batch_tags = [], []
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
            if len(batch_runs) == 5000 or i == count - 1:
                conn.execute(sa.insert(RunsTable), batch_runs)
                conn.execute(sa.insert(RunTagsTable), batch_tags)
                batch_runs, batch_tags = [], []
        conn.execute(sa.text("ANALYZE runs; ANALYZE run_tags"))


def bench_storage(prefix: str) -> tuple[object, Path, str]:
    """An embedded Postgres with a Dagster storage database (behind a DAGSTER_HOME) and a migrated task registry:
    (the server, the DAGSTER_HOME folder, the registry URL)."""
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
        self.errors = 0
        self._streams: tuple[asyncio.StreamReader, asyncio.StreamWriter] | None = None

    async def get(self) -> None:
        """Send the request, read the whole answer, record its latency; a failure is counted and reconnects."""
        began = time.perf_counter()
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


async def load(base: str, path: str, clients: int, total: int) -> tuple[list[float], float, int]:
    """`clients` connections, each sending its next request as soon as the previous answer arrived (closed loop)."""
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
    return latencies, len(latencies) / elapsed, errors


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
    args = parser.parse_args()

    import dagster as dg

    server, home, registry_url = bench_storage("bench-api-")
    began = time.perf_counter()
    with dg.DagsterInstance.from_config(str(home)) as instance:
        insert_runs(instance, args.runs, 0.10)
        total = instance.get_runs_count()
    print(f"inserted {total} runs in {time.perf_counter() - began:.1f} s", flush=True)

    rows = []
    for cache in args.cache:
        for workers in args.workers:
            rows += measure(args, home, registry_url, workers, cache)
    cpu = next((line.split(":", 1)[1].strip() for line in open("/proc/cpuinfo") if line.startswith("model name")), "?")
    print(f"\nMachine: {os.cpu_count()} cores, {cpu}; load average {os.getloadavg()[0]:.1f} at the end.")
    print(f"{total:,} runs in storage ({args.runs // 10:,} maintenance); {args.clients} concurrent clients "
          f"(closed loop), {args.requests} requests per endpoint; 1 client: {args.single} sequential requests; "
          f"paced: {args.clients} clients each sending one request every {args.pace} s for {args.paced_seconds} s.\n")
    print(f"| cache | workers | endpoint | 1 client p50 | 1 client p99 | {args.clients} clients p50 | {args.clients} clients p99 "
          f"| {args.clients} clients req/s | paced p50 | paced p99 | errors |")
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    for cache, workers, label, s50, s99, m50, m99, rps, p50, p99, errors in rows:
        print(f"| {cache:g} s | {workers} | `{label}` | {s50:.1f} ms | {s99:.1f} ms | {m50:.1f} ms | {m99:.1f} ms | {rps:.0f} "
              f"| {p50:.1f} ms | {p99:.1f} ms | {errors} |")
    return 0


def measure(args: argparse.Namespace, home: Path, registry_url: str, workers: int, cache: float) -> list[tuple]:
    """Serve the API with `workers` processes and load each endpoint: 1 client, N clients closed loop, paced."""
    import httpx

    from local_stack.stack import free_port, wait_for_http

    port = free_port()
    env = {**os.environ, "DAGSTER_HOME": str(home), "MAINTENANCE_DATABASE_URL": registry_url,
           "SCHEDULER_API_KEY": KEY, "MAINTENANCE_API_CACHE_SECONDS": str(cache)}
    api = subprocess.Popen([sys.executable, "-m", "control_api", "--port", str(port), "--log-level",
                            "warning", "--workers", str(workers)], env=env, cwd=Path(__file__).resolve().parent.parent)
    base = f"http://127.0.0.1:{port}"
    rows = []
    try:
        wait_for_http(f"{base}/health", 60, api)
        headers = {"Authorization": f"Bearer {KEY}"}
        page = httpx.get(f"{base}/executions", params={"limit": 20}, headers=headers)
        for _ in range(50):  # a page ~1,000 executions deep, following the Link headers
            page = httpx.get(f"{base}{page.links['next']['url']}", headers=headers)
        cursor = dict(httpx.URL(page.links["next"]["url"]).params)["cursor"]
        paths = {
            "/executions?limit=20": "/executions?limit=20",
            "/executions?limit=20&status=failed": "/executions?limit=20&status=failed",
            "/executions?limit=20&cursor=<page 51>": f"/executions?limit=20&cursor={cursor}",
            "/stats": "/stats",
        }
        for path in paths.values():  # warm up every worker: imports, pools, Postgres caches
            asyncio.run(load(base, path, 2 * workers, 20 * workers))
        for label, path in paths.items():
            single, _, single_errors = asyncio.run(load(base, path, 1, args.single))
            many, throughput, errors = asyncio.run(load(base, path, args.clients, args.requests))
            steady, steady_errors = asyncio.run(paced(base, path, args.clients, args.pace, args.paced_seconds))
            rows.append((cache, workers, label, statistics.median(single), percentile(single, 99), statistics.median(many),
                         percentile(many, 99), throughput, statistics.median(steady), percentile(steady, 99),
                         errors + single_errors + steady_errors))
            print(f"cache {cache:g} s, {workers} worker(s) {label}: done", flush=True)
    finally:
        api.terminate()
        api.wait(timeout=30)
    return rows


if __name__ == "__main__":
    sys.exit(main())
