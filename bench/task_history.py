"""CPU per `GET /tasks/{name}/history` request, 1-day and 99-day ranges side by side, by hand.

    .venv/bin/python bench/task_history.py [--requests 15]

Starts an embedded Postgres (a registry and a Dagster run storage database), serves the control API in this process
(uvicorn in a thread) and asks for the history of a weekly and a daily task created 120 days ago, over the last day
and the last 99 days. Each request's CPU is this process's CPU time around it (server and client both run here; the
client's share is the same for every row). "before" serves the same requests with the expected runs computed the old
way, the dispatcher's rule applied to every minute of the range (`every_minute_expected`, kept here as the
reference), so both are measured in one run on one machine, interleaved.
"""

from __future__ import annotations

import argparse
import datetime as dt
import os
import shutil
import statistics
import sys
import tempfile
import threading
import time
import warnings
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

KEY = "bench-key-0123456789"


def every_minute_expected(task, start: dt.datetime, end: dt.datetime, timezone: str, limit: int | None = None):
    """The old computation: the dispatcher's rule over every real minute of [start, end)."""
    from maintenance_jobs.schedule import ANY, ONE_MINUTE, due_minutes, wall_clock_slots

    floor = start.astimezone(dt.UTC).replace(second=0, microsecond=0)
    first = floor if floor == start else floor + ONE_MINUTE
    count = -((first - end) // ONE_MINUTE) if end > first else 0
    minutes = [first + ONE_MINUTE * i for i in range(count)]
    if all(value == ANY for value in vars(task.cron_fields).values()):
        return minutes
    return due_minutes(task.cron_fields, wall_clock_slots(minutes, timezone))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--requests", type=int, default=15, help="requests per row (median reported)")
    args = parser.parse_args()
    warnings.filterwarnings("ignore")  # Dagster's beta and deprecation notices while the API loads definitions

    import dagster as dg
    import httpx
    import sqlalchemy as sa
    import uvicorn

    from control_api.app import create_app
    from control_api.config import ApiSettings
    from local_stack.embedded_postgres import ensure_database, psycopg2_url, temporary_embedded_postgres
    from local_stack.stack import free_port
    from maintenance_jobs.database.migrate import upgrade
    from maintenance_jobs.database.tables import scheduled_tasks
    from maintenance_jobs.execution_history import task_view

    shipped = task_view.expected_minutes
    with temporary_embedded_postgres("task-history-bench-") as server:
        url = psycopg2_url(server.get_uri())
        registry_url, dagster_url = ensure_database(url, "registry"), ensure_database(url, "dagster")
        upgrade(registry_url)
        home = Path(tempfile.mkdtemp(prefix="task-history-bench-home-"))
        (home / "dagster.yaml").write_text(
            f"storage:\n  postgres:\n    postgres_url: {dagster_url}\ntelemetry:\n  enabled: false\n")
        instance = dg.DagsterInstance.from_config(str(home))
        settings = ApiSettings(registry_url=registry_url, api_key=KEY, dagster_database_url=dagster_url,
                               dagster_ui_url="http://dagster.bench", dagster_webserver_url="http://dagster.bench",
                               cache_seconds=0, metrics_cache_seconds=0)

        class Server(uvicorn.Server):
            def install_signal_handlers(self) -> None:
                pass

        port = free_port()
        api = Server(uvicorn.Config(create_app(settings), host="127.0.0.1", port=port, log_level="warning"))
        thread = threading.Thread(target=api.run, daemon=True)
        thread.start()
        while not api.started:
            time.sleep(0.05)
        now = dt.datetime.now(dt.UTC).replace(microsecond=0)
        tasks = {"weekly": {"minute": 5, "hour": 3, "day_of_week": 0}, "daily": {"minute": 30, "hour": 2}}
        results: dict[tuple[str, str, str], list[float]] = {}
        with httpx.Client(base_url=f"http://127.0.0.1:{port}", headers={"Authorization": f"Bearer {KEY}"},
                          timeout=60) as client:
            for name, fields in tasks.items():
                body = {"task_name": name, "service": "bench", "executor": "example_executor", "priority": 50,
                        "config": {"message": "hi", "delay_seconds": 0}, **fields}
                assert client.post("/tasks", json=body).status_code == 201
            engine = sa.create_engine(registry_url)
            with engine.begin() as conn:
                old = now - dt.timedelta(days=120)
                conn.execute(scheduled_tasks.update().values(created_at=old, updated_at=old))
            engine.dispose()
            ranges = {"1 day": dt.timedelta(days=1), "99 days": dt.timedelta(days=99)}
            versions = {"before (every minute)": every_minute_expected, "after (cron occurrences)": shipped}
            for _ in range(args.requests):
                for version, compute in versions.items():  # interleaved: a load change hits both alike
                    task_view.expected_minutes = compute
                    for name in tasks:
                        for label, span in ranges.items():
                            params = {"since": (now - span).isoformat(), "until": now.isoformat()}
                            before = time.process_time()
                            response = client.get(f"/tasks/{name}/history", params=params)
                            spent = time.process_time() - before
                            assert response.status_code == 200, response.text
                            results.setdefault((name, version, label), []).append(spent)
            task_view.expected_minutes = shipped
        api.should_exit = True
        thread.join(timeout=10)
        instance.dispose()
        shutil.rmtree(home, ignore_errors=True)
    load = os.getloadavg()[0]
    print(f"{args.requests} requests per row, median CPU per request; Python {sys.version.split()[0]}, "
          f"{os.cpu_count()} cores, load average {load:.1f} at the end")
    print("| task | computation | 1 day | 99 days | 99 days / 1 day |")
    print("|---|---|---|---|---|")
    for name in tasks:
        for version in versions:
            day, long = (statistics.median(results[(name, version, label)]) for label in ranges)
            print(f"| {name} | {version} | {day * 1000:.1f} ms | {long * 1000:.1f} ms | {long / day:.1f}x |")


if __name__ == "__main__":
    main()
