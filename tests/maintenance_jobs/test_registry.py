"""The registry on real Postgres: migrations, first-start seeding, CRUD errors, due selection, run results."""

from __future__ import annotations

import datetime as dt
import subprocess
import sys

import pytest
import sqlalchemy as sa

from maintenance_jobs.cli import main as maintenance_cli
from maintenance_jobs.database.migrate import HEAD_REVISION, MIGRATIONS_DIR, applied_revision, current_revision, upgrade
from maintenance_jobs.database.tables import scheduled_tasks
from maintenance_jobs.registry import (
    DuplicateTask,
    TaskNotFound,
    TaskValidationError,
    create_task,
    delete_task,
    due_runs,
    get_task,
    list_tasks,
    record_run_end,
    update_task,
)
from maintenance_jobs.schedule import wall_clock_slots
from maintenance_jobs.seed import seed_registry
from tests.task_rows import task_data

pytestmark = pytest.mark.integration

SEED_NAMES = ["backup_docker_configs_daily", "backup_postgres_nightly", "sync_fastapi_docs_monthly",
              "sync_ollama_docs_monthly", "test_example_task"]


def test_upgrade_is_idempotent_and_uses_its_own_version_table(fresh_database_url: str) -> None:
    assert current_revision(fresh_database_url) is None
    upgrade(fresh_database_url)
    upgrade(fresh_database_url)
    assert current_revision(fresh_database_url) == "0002"
    engine = sa.create_engine(fresh_database_url)
    try:
        tables = set(sa.inspect(engine).get_table_names())
    finally:
        engine.dispose()
    assert {"scheduled_tasks", "maintenance_registry_meta", "maintenance_alembic_version"} <= tables
    assert "alembic_version" not in tables


def test_the_head_the_registry_is_checked_against_is_the_newest_migration() -> None:
    from alembic.script import ScriptDirectory

    # A new migration that leaves HEAD_REVISION behind would let a registry one revision short pass as current.
    assert ScriptDirectory(str(MIGRATIONS_DIR)).get_current_head() == HEAD_REVISION


def test_a_registry_behind_is_upgraded_and_one_at_the_head_is_read_without_alembic(fresh_database_url: str) -> None:
    upgrade(fresh_database_url, "0001")
    engine = sa.create_engine(fresh_database_url)
    try:
        with engine.connect() as conn:
            assert applied_revision(conn) == "0001"
        upgrade(fresh_database_url)
        with engine.connect() as conn:
            assert applied_revision(conn) == "0002"
    finally:
        engine.dispose()
    # A fresh interpreter, as the control API's worker starts: upgrading a registry at the head loads no Alembic.
    probe = ("import sys; from maintenance_jobs.seed import prepare_registry; "
             f"prepare_registry({fresh_database_url!r}); "
             "print(sorted({m.split('.')[0] for m in sys.modules} & {'alembic', 'mako'}))")
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[]"


def test_an_empty_database_has_no_applied_revision(fresh_database_url: str) -> None:
    engine = sa.create_engine(fresh_database_url)
    try:
        with engine.connect() as conn:
            assert applied_revision(conn) is None
    finally:
        engine.dispose()


def test_database_rejects_out_of_range_rows_written_by_hand(registry_engine: sa.Engine) -> None:
    with pytest.raises(sa.exc.IntegrityError, match="ck_scheduled_tasks_priority"):
        with registry_engine.begin() as conn:
            conn.execute(scheduled_tasks.insert().values(task_name="x", service="s", executor="e", priority=0))


def test_seeding_happens_once_and_respects_operator_edits(registry_engine: sa.Engine) -> None:
    assert sorted(seed_registry(registry_engine)) == SEED_NAMES
    backup = get_task(registry_engine, "backup_docker_configs_daily")
    assert (backup.minute, backup.hour, backup.priority) == (5, 3, 20)
    fastapi = get_task(registry_engine, "sync_fastapi_docs_monthly")
    assert (fastapi.day_of_month, fastapi.hour, fastapi.minute, fastapi.priority) == (11, 4, 0, 60)
    assert get_task(registry_engine, "sync_ollama_docs_monthly").day_of_month == 12
    # The every-minute example is seeded disabled (a fresh install starts no run a minute); the rest enabled.
    assert get_task(registry_engine, "test_example_task").enabled is False
    assert backup.enabled and fastapi.enabled
    # The operator enables one task and deletes another; a restart must not undo either.
    update_task(registry_engine, "test_example_task", {"enabled": True})
    delete_task(registry_engine, "sync_ollama_docs_monthly")
    assert seed_registry(registry_engine) == []
    assert get_task(registry_engine, "test_example_task").enabled is True
    with pytest.raises(TaskNotFound):
        get_task(registry_engine, "sync_ollama_docs_monthly")


def test_cli_upgrades_and_seeds(fresh_database_url: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert maintenance_cli(["--database-url", fresh_database_url, "db", "upgrade"]) == 0
    assert maintenance_cli(["--database-url", fresh_database_url, "seed"]) == 0
    assert maintenance_cli(["--database-url", fresh_database_url, "seed"]) == 0
    out = capsys.readouterr().out
    assert "revision 0002" in out and "seeded: test_example_task" in out and "already seeded" in out


def test_crud_cycle_and_errors(registry_engine: sa.Engine) -> None:
    created = create_task(registry_engine, task_data("a", service="homelab", priority=10))
    assert created.id > 0 and created.created_at is not None and created.last_run is None
    with pytest.raises(DuplicateTask, match="'a' already exists"):
        create_task(registry_engine, task_data("a"))
    create_task(registry_engine, task_data("b", enabled=False))
    assert [t.task_name for t in list_tasks(registry_engine)] == ["a", "b"]
    assert [t.task_name for t in list_tasks(registry_engine, enabled=True)] == ["a"]
    assert [t.task_name for t in list_tasks(registry_engine, service="homelab")] == ["a"]

    updated = update_task(registry_engine, "a", {"priority": 60, "hour": 4})
    assert (updated.priority, updated.hour, updated.service) == (60, 4, "homelab")
    assert updated.updated_at >= created.updated_at

    # A partial update is validated against the merged row: switching executor needs a config it accepts.
    with pytest.raises(TaskValidationError) as info:
        update_task(registry_engine, "a", {"executor": "config_backup_executor"})
    assert info.value.field == "config.sources"
    with pytest.raises(TaskValidationError) as info:
        update_task(registry_engine, "a", {"last_status": "success"})
    assert info.value.field == "last_status"
    with pytest.raises(DuplicateTask):
        update_task(registry_engine, "a", {"task_name": "b"})
    with pytest.raises(TaskNotFound):
        update_task(registry_engine, "zzz", {"priority": 1})
    # Nothing was lost by the rejected updates.
    assert get_task(registry_engine, "a").executor == "example_executor"

    renamed = update_task(registry_engine, "a", {"task_name": "a2"})
    assert renamed.id == created.id
    delete_task(registry_engine, "a2")
    with pytest.raises(TaskNotFound, match="'a2' not found"):
        delete_task(registry_engine, "a2")


def test_due_runs_selects_enabled_due_tasks_by_priority(registry_engine: sa.Engine) -> None:
    create_task(registry_engine, task_data("every_minute", priority=50))
    create_task(registry_engine, task_data("daily_0305", priority=20, minute=5, hour=3))
    create_task(registry_engine, task_data("daily_0306", priority=1, minute=6, hour=3))
    create_task(registry_engine, task_data("disabled", priority=1, enabled=False))
    create_task(registry_engine, task_data("monday_only", priority=5, minute=5, hour=3, day_of_week=0))
    # 2025-06-03 03:05 in Auckland is a Tuesday.
    minute = dt.datetime(2025, 6, 2, 15, 5, tzinfo=dt.UTC)
    due = due_runs(registry_engine, wall_clock_slots([minute], "Pacific/Auckland"))
    assert [(d.task.task_name, d.minute) for d in due] == [("daily_0305", minute), ("every_minute", minute)]
    # A registry change is seen by the very next evaluation.
    update_task(registry_engine, "every_minute", {"enabled": False})
    due = due_runs(registry_engine, wall_clock_slots([minute], "Pacific/Auckland"))
    assert [d.task.task_name for d in due] == ["daily_0305"]


def test_record_run_end_keeps_the_newest_result(registry_engine: sa.Engine) -> None:
    create_task(registry_engine, task_data("t"))
    newer = dt.datetime(2025, 6, 1, 3, 5, tzinfo=dt.UTC)
    assert record_run_end(registry_engine, "t", started_at=newer, status="timeout", duration_seconds=61.5)
    # A retry of an older run finishing late must not overwrite the newer result.
    assert not record_run_end(registry_engine, "t", started_at=newer - dt.timedelta(hours=1), status="success", duration_seconds=1)
    task = get_task(registry_engine, "t")
    assert (task.last_run, task.last_status, task.last_duration_seconds) == (newer, "timeout", 61.5)
    with pytest.raises(ValueError, match="status must be one of"):
        record_run_end(registry_engine, "t", started_at=newer, status="weird", duration_seconds=None)
