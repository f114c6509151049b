"""The task registry's repository: the only module that reads and writes `scheduled_tasks`.

The REST API maps the errors: TaskNotFound → 404, DuplicateTask → 409, TaskValidationError → 422 (its `field`).
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import sqlalchemy as sa
from sqlalchemy.dialects.postgresql import insert

from maintenance_jobs.database.tables import scheduled_tasks
from maintenance_jobs.models import READ_ONLY_FIELDS, STATUSES, Task, TaskSpec, TaskValidationError, validate_task
from maintenance_jobs.schedule import ANY, CronFields, Slot, due_minutes

__all__ = [
    "DueRun",
    "DuplicateTask",
    "TaskNotFound",
    "TaskValidationError",
    "create_task",
    "delete_task",
    "due_runs",
    "get_task",
    "list_tasks",
    "record_run_end",
    "update_task",
]


class TaskNotFound(LookupError):
    def __init__(self, task_name: str) -> None:
        super().__init__(f"task {task_name!r} not found")
        self.task_name = task_name


class DuplicateTask(ValueError):
    def __init__(self, task_name: str) -> None:
        super().__init__(f"task {task_name!r} already exists")
        self.task_name = task_name


def _task(row: sa.Row) -> Task:
    return Task.model_validate(dict(row._mapping))


def list_tasks(engine: sa.Engine, *, enabled: bool | None = None, service: str | None = None) -> list[Task]:
    """All tasks, optionally filtered, by priority then name."""
    query = sa.select(scheduled_tasks).order_by(scheduled_tasks.c.priority, scheduled_tasks.c.task_name)
    if enabled is not None:
        query = query.where(scheduled_tasks.c.enabled == enabled)
    if service is not None:
        query = query.where(scheduled_tasks.c.service == service)
    with engine.connect() as conn:
        return [_task(row) for row in conn.execute(query)]


def get_task(engine: sa.Engine, task_name: str) -> Task:
    with engine.connect() as conn:
        row = conn.execute(sa.select(scheduled_tasks).where(scheduled_tasks.c.task_name == task_name)).first()
    if row is None:
        raise TaskNotFound(task_name)
    return _task(row)


def create_task(engine: sa.Engine, data: Mapping[str, Any]) -> Task:
    """Insert a validated task; DuplicateTask when the name is taken."""
    spec = validate_task(data)
    statement = (
        insert(scheduled_tasks)
        .values(**spec.model_dump())
        .on_conflict_do_nothing(index_elements=["task_name"])
        .returning(*scheduled_tasks.c)
    )
    with engine.begin() as conn:
        row = conn.execute(statement).first()
    if row is None:
        raise DuplicateTask(spec.task_name)
    return _task(row)


def update_task(engine: sa.Engine, task_name: str, changes: Mapping[str, Any]) -> Task:
    """Apply a partial update; the merged row is validated as a whole (e.g. a new executor with its config)."""
    read_only = sorted(set(changes) & READ_ONLY_FIELDS)
    if read_only:
        raise TaskValidationError(read_only[0], "is read-only")
    with engine.begin() as conn:
        row = conn.execute(
            sa.select(scheduled_tasks).where(scheduled_tasks.c.task_name == task_name).with_for_update()
        ).first()
        if row is None:
            raise TaskNotFound(task_name)
        current = _task(row).model_dump(include=set(TaskSpec.model_fields))
        # The executor config is checked when it changes: a stored config the current settings refuse must not
        # stop the task from being disabled, renamed or rescheduled (it stays reported and is never run).
        spec = validate_task({**current, **changes}, check_config=bool({"executor", "config"} & set(changes)))
        if spec.task_name != task_name:
            taken = conn.execute(sa.select(scheduled_tasks.c.id).where(scheduled_tasks.c.task_name == spec.task_name))
            if taken.first() is not None:
                raise DuplicateTask(spec.task_name)
        try:
            updated = conn.execute(
                scheduled_tasks.update()
                .where(scheduled_tasks.c.id == row.id)
                .values(**spec.model_dump(), updated_at=sa.func.now())
                .returning(*scheduled_tasks.c)
            ).one()
        except sa.exc.IntegrityError as exc:
            # A create or another rename took the name between the check above and this write.
            if _is_unique_violation(exc):
                raise DuplicateTask(spec.task_name) from None
            raise
    return _task(updated)


def _is_unique_violation(exc: sa.exc.IntegrityError) -> bool:
    return getattr(exc.orig, "pgcode", None) == "23505"


def delete_task(engine: sa.Engine, task_name: str) -> None:
    with engine.begin() as conn:
        deleted = conn.execute(
            scheduled_tasks.delete().where(scheduled_tasks.c.task_name == task_name).returning(scheduled_tasks.c.id)
        ).first()
    if deleted is None:
        raise TaskNotFound(task_name)


@dataclass(frozen=True)
class DueRun:
    """A task due at one real minute (UTC)."""

    task: Task
    minute: dt.datetime


def _field_matches(column: sa.Column, values: set[int]) -> sa.ColumnElement[bool]:
    return sa.or_(column == ANY, column.in_(sorted(values)))


def due_runs(engine: sa.Engine, slots: Sequence[Slot]) -> list[DueRun]:
    """Enabled tasks due in `slots`, most urgent first.

    SQL narrows the rows to those whose every field could match some wall time of the window (a superset);
    croniter then decides exactly, so the cost follows the candidates, not the size of the registry.
    """
    if not slots:
        return []
    walls = [s.wall for s in slots] + [w for s in slots for w in s.skipped_walls]
    c = scheduled_tasks.c
    query = sa.select(scheduled_tasks).where(
        c.enabled.is_(True),
        _field_matches(c.minute, {w.minute for w in walls}),
        _field_matches(c.hour, {w.hour for w in walls}),
        _field_matches(c.day_of_month, {w.day for w in walls}),
        _field_matches(c.month, {w.month for w in walls}),
        _field_matches(c.day_of_week, {w.weekday() for w in walls}),
    )
    with engine.connect() as conn:
        rows = conn.execute(query).all()
    due: list[DueRun] = []
    # Candidates of one window share few distinct schedules (each field is "any" or the window's value), so
    # croniter runs once per schedule, not once per task.
    minutes_by_schedule: dict[CronFields, list[dt.datetime]] = {}
    for row in rows:
        task = _task(row)
        fields = task.cron_fields
        if fields not in minutes_by_schedule:
            minutes_by_schedule[fields] = due_minutes(fields, slots)
        due.extend(DueRun(task, minute) for minute in minutes_by_schedule[fields])
    due.sort(key=lambda d: (d.task.priority, d.minute, d.task.task_name))
    return due


def record_run_end(
    engine: sa.Engine | sa.Connection, task_name: str, *, started_at: dt.datetime, status: str,
    duration_seconds: float | None, retry_count: int = 0,
) -> bool:
    """Write last_run / last_status / last_duration / retry_count; an older run never overwrites a newer one's
    result. Given a connection, it writes inside the caller's transaction."""
    if status not in STATUSES:
        raise ValueError(f"status must be one of {STATUSES}, not {status!r}")
    c = scheduled_tasks.c
    statement = (
        scheduled_tasks.update()
        .where(c.task_name == task_name, sa.or_(c.last_run.is_(None), c.last_run <= started_at))
        .values(last_run=started_at, last_status=status, last_duration_seconds=duration_seconds,
                retry_count=retry_count)
    )
    if isinstance(engine, sa.Connection):
        return engine.execute(statement).rowcount > 0
    with engine.begin() as conn:
        result = conn.execute(statement)
    return result.rowcount > 0
