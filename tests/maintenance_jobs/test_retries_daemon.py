"""Retries proven end to end with the default (local) run launcher: the real `dagster-daemon` with the project's
dagster.yaml (run retries on) on Postgres, the maintenance code location, the dispatcher launching two plug-in tasks
at their cron minute, Dagster retrying their failed runs, and the run status / backfill sensors recording each
attempt in the execution history.

- `fails_then_succeeds` (fails once), max_retries 2: failed, then success after one retry; no third run.
- `always_fails`, max_retries 2: failed three times (the run and exactly two retries); no fourth run.
Every attempt is in the history with its retry number, `triggered_by: retry` after the first, and the task row's
last status and retry count follow the final outcome.
"""

from __future__ import annotations

import datetime as dt
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import dagster as dg
import pytest
import sqlalchemy as sa

from maintenance_jobs.database.tables import scheduled_tasks, task_executions
from maintenance_jobs.execution_history.task_view import task_history
from maintenance_jobs.registry import create_task, get_task
from maintenance_jobs.seed import prepare_registry
from tests.task_rows import task_data

pytestmark = [pytest.mark.integration, pytest.mark.slow]

REPO = Path(__file__).resolve().parents[2]
DAEMON = Path(sys.executable).with_name("dagster-daemon")
PLUGINS = "tests.maintenance_jobs.retry_plugins"
TIMEOUT = 420


def retry_tasks(due: dt.datetime, state: Path) -> dict[str, dict]:
    """The two tasks, due once at `due` (UTC, the test's maintenance timezone)."""
    when = {"minute": due.minute, "hour": due.hour, "day_of_month": due.day, "month": due.month}
    return {
        "flaky_once": task_data("flaky_once", executor="fails_then_succeeds", max_retries=2, **when,
                                config={"state_dir": str(state / "flaky_once"), "failures": 1}),
        "always_broken": task_data("always_broken", executor="always_fails", max_retries=2, **when,
                                   config={"state_dir": str(state / "always_broken")}),
    }


def history_rows(engine: sa.Engine, task_name: str) -> list[sa.Row]:
    with engine.connect() as conn:
        return list(conn.execute(sa.select(task_executions).where(task_executions.c.task_name == task_name)
                                 .order_by(task_executions.c.triggered_at)))


def assert_retried_as_configured(engine: sa.Engine, instance: dg.DagsterInstance | None, due: dt.datetime,
                                 state: Path | None, ui_url: str = "http://ui") -> None:
    """The retry outcome both launchers must show (instance None: not checked against run storage)."""
    flaky, broken = history_rows(engine, "flaky_once"), history_rows(engine, "always_broken")
    assert [(r.status, r.triggered_by, r.retry_count) for r in flaky] == [
        ("failed", "scheduler", 0), ("success", "retry", 1)]
    assert [(r.status, r.triggered_by, r.retry_count) for r in broken] == [
        ("failed", "scheduler", 0), ("failed", "retry", 1), ("failed", "retry", 2)]
    for rows in (flaky, broken):
        assert all(r.scheduled_for == due for r in rows)  # every attempt is for the same cron minute
        assert [r.parent_run_id for r in rows[1:]] == [r.run_id for r in rows[:-1]]
        assert all(r.task_id is not None and r.executor in ("fails_then_succeeds", "always_fails") for r in rows)
    assert "attempt 1 fails on purpose" in flaky[0].error and flaky[1].output == "attempt 2 succeeded after 1 failed"
    assert [("attempt %d fails" % n) in r.error for n, r in enumerate(broken, start=1)] == [True] * 3
    flaky_task, broken_task = get_task(engine, "flaky_once"), get_task(engine, "always_broken")
    assert (flaky_task.last_status, flaky_task.retry_count) == ("success", 1)
    assert (broken_task.last_status, broken_task.retry_count) == ("failed", 2)
    if state is not None:
        assert (state / "flaky_once" / "attempts").read_text() == "2"
        assert (state / "always_broken" / "attempts").read_text() == "3"
    if instance is not None:  # no run beyond those: max_retries bounds Dagster's retries
        for task, count in (("flaky_once", 2), ("always_broken", 3)):
            assert len(instance.get_run_records(dg.RunsFilter(tags={"maintenance/task": task}))) == count
        now = dt.datetime.now(dt.UTC)
        for task, status, attempts in (("flaky_once", "success", 2), ("always_broken", "failed", 3)):
            view = task_history(engine, instance, get_task(engine, task), due - dt.timedelta(minutes=1), now, now,
                                "UTC", ui_url)
            assert [(e.outcome, e.status, e.attempts) for e in view.expected_runs] == [("ran", status, attempts)]
            assert [i.retry_count for i in view.expected_runs[0].executions] == list(range(attempts))


@pytest.fixture
def daemon_home(tmp_path: Path, dagster_database_url: str) -> Path:
    """DAGSTER_HOME with the project's own dagster.yaml (storage from DAGSTER_POSTGRES_URL, run retries on)."""
    home = tmp_path / "home"
    home.mkdir()
    shutil.copy(REPO / "dagster.yaml", home / "dagster.yaml")
    (tmp_path / "workspace.yaml").write_text(
        "load_from:\n  - python_module:\n      module_name: maintenance_jobs.definitions\n"
        f"      location_name: maintenance_jobs\n      working_directory: {REPO}\n")
    return home


def test_retries_with_the_local_launcher(tmp_path: Path, daemon_home: Path, pg_instance: dg.DagsterInstance,
                                         dagster_database_url: str, registry_url: str,
                                         monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MAINTENANCE_PLUGIN_PACKAGE", PLUGINS)  # the API-side validation of the tasks' configs
    prepare_registry(registry_url)
    engine = sa.create_engine(registry_url)
    with engine.begin() as conn:  # only the two test tasks run
        conn.execute(scheduled_tasks.update().values(enabled=False))
    state = tmp_path / "state"
    # The next minute at least 20 s away: the dispatcher's first tick evaluates the minute it falls in, so the daemon
    # has that minute too to start (a minute or more; two minutes out made the test wait ~90 s on average).
    soon = dt.datetime.now(dt.UTC) + dt.timedelta(seconds=20)
    due = soon.replace(second=0, microsecond=0) + dt.timedelta(minutes=1)
    for data in retry_tasks(due, state).values():
        create_task(engine, data)
    env = {**os.environ, "DAGSTER_HOME": str(daemon_home), "DAGSTER_POSTGRES_URL": dagster_database_url,
           "MAINTENANCE_DATABASE_URL": registry_url, "MAINTENANCE_TIMEZONE": "UTC",
           "MAINTENANCE_PLUGIN_PACKAGE": PLUGINS, "ALERT_WEBHOOK_URL": ""}
    log_path = tmp_path / "daemon.log"
    with log_path.open("w") as log:
        daemon = subprocess.Popen([str(DAEMON), "run", "-w", str(tmp_path / "workspace.yaml")], cwd=REPO, env=env,
                                  stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    try:
        deadline = time.monotonic() + TIMEOUT
        while time.monotonic() < deadline:
            assert daemon.poll() is None, log_path.read_text()[-3000:]
            if len(history_rows(engine, "flaky_once")) >= 2 and len(history_rows(engine, "always_broken")) >= 3:
                break
            time.sleep(3)
        else:
            recorded = [(r.task_name, r.status) for t in ("flaky_once", "always_broken")
                        for r in history_rows(engine, t)]
            raise AssertionError(f"attempts not all recorded within {TIMEOUT} s: {recorded}\n"
                                 + log_path.read_text()[-4000:])
        time.sleep(20)  # a fourth attempt would be created within seconds of the third failure
        assert_retried_as_configured(engine, pg_instance, due, state)
    finally:
        os.killpg(daemon.pid, signal.SIGTERM)
        try:
            daemon.wait(timeout=30)
        except subprocess.TimeoutExpired:
            os.killpg(daemon.pid, signal.SIGKILL)
            daemon.wait(timeout=10)
        engine.dispose()
