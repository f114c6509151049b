"""`GET /tasks/{name}/history` over real HTTP costs CPU by the runs the range expects, not by its minutes: a weekly
task's 99-day history costs about what its 1-day history costs (the server runs in this process: process CPU time
counts its work)."""

from __future__ import annotations

import datetime as dt
import statistics
import time

import pytest
import sqlalchemy as sa

from maintenance_jobs.database.tables import scheduled_tasks
from tests.control_api.conftest import RunningApi
from tests.task_rows import task_body

pytestmark = [pytest.mark.api, pytest.mark.integration]


def cpu_per_request(client, path: str, params: dict, repeats: int = 5) -> float:
    samples = []
    for _ in range(repeats):
        before = time.process_time()
        response = client.get(path, params=params)
        samples.append(time.process_time() - before)
        assert response.status_code == 200, response.text
    return statistics.median(samples)


def test_a_99_day_history_of_a_weekly_task_costs_about_what_one_day_costs(api: RunningApi) -> None:
    now = dt.datetime.now(dt.UTC)
    with api.client() as client:
        created = client.post("/tasks", json=task_body("weekly", minute=5, hour=3, day_of_week=0))
        assert created.status_code == 201, created.text
        engine = sa.create_engine(api.registry_url)
        try:
            with engine.begin() as conn:  # created 120 days ago: the whole range expects runs
                conn.execute(scheduled_tasks.update().where(scheduled_tasks.c.task_name == "weekly")
                             .values(created_at=now - dt.timedelta(days=120), updated_at=now - dt.timedelta(days=120)))
        finally:
            engine.dispose()
        path = "/tasks/weekly/history"
        until = now.replace(microsecond=0)
        long = {"since": (until - dt.timedelta(days=99)).isoformat(), "until": until.isoformat()}
        short = {"since": (until - dt.timedelta(days=1)).isoformat(), "until": until.isoformat()}
        history = client.get(path, params=long).json()
        counts = history["counts"]
        assert 14 <= counts["expected"] <= 15 and counts["missed"] == counts["expected"]
        cpu_short = cpu_per_request(client, path, short)
        cpu_long = cpu_per_request(client, path, long)
    # Evaluating every minute of the range, the 99-day request cost ~0.7 CPU-s against 0.01 for one day.
    assert cpu_long <= 3 * cpu_short + 0.1, (cpu_long, cpu_short)
