"""The registry's side of the history: `task_executions` rows, the recorded-through mark and the dispatcher's skips.

The only module that reads or writes those tables (the nightly retention deletes old rows through
orchestration_core.audit.execution_history).
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

import sqlalchemy as sa
from sqlalchemy.dialects.postgresql import insert

from maintenance_jobs.database.tables import dispatch_skips, registry_meta, scheduled_tasks, task_executions
from maintenance_jobs.execution_history.execution_row import ExecutionSummary, execution_id
from maintenance_jobs.registry import record_run_end

# Registry fact: every maintenance run that ended (Dagster `update_timestamp`, naive UTC) before this instant is
# recorded. Unset until the first backfill pass has gone through the whole run storage (a fresh install, an upgrade).
RECORDED_THROUGH_KEY = "history_recorded_through"
_ID_ATTEMPTS = 8
_READ_CHUNK = 1000

T = task_executions.c


def write_summary(engine: sa.Engine, summary: ExecutionSummary) -> int:
    """Insert the run's row once (a second call changes nothing) and let the task row follow it, in one transaction;
    returns the row's id."""
    with engine.begin() as conn:
        task_id = None
        if summary.has_task:
            task_id = conn.execute(sa.select(scheduled_tasks.c.id)
                                   .where(scheduled_tasks.c.task_name == summary.task_name)).scalar()
        row = summary.model_copy(update={"task_id": task_id}).row()
        row.pop("id")
        stored = None
        for attempt in range(_ID_ATTEMPTS):
            stored = conn.execute(insert(task_executions).values(**row, id=execution_id(summary.run_id, attempt))
                                  .on_conflict_do_nothing().returning(T.id)).scalar()
            if stored is not None:
                break
            # A conflict: this run is already recorded (another writer), or another run holds the id (try the next).
            stored = conn.execute(sa.select(T.id).where(T.run_id == summary.run_id)).scalar()
            if stored is not None:
                break
        if stored is None:
            raise RuntimeError(f"no free execution id for run {summary.run_id} after {_ID_ATTEMPTS} attempts")
        if summary.has_task:
            # Dated by its start (a run that never started: its end, else its creation), as the old scheduler did.
            record_run_end(conn, summary.task_name,
                           started_at=summary.started_at or summary.completed_at or summary.triggered_at,
                           status=summary.status, duration_seconds=summary.duration_seconds,
                           retry_count=summary.retry_count)
    return stored


def amend_error(engine: sa.Engine, run_id: str, error: str) -> bool:
    """Replace a recorded run's error with what the run guard later decided about it (the run was lost to an
    infrastructure failure and re-launched, superseded or reported); False when the run is not recorded yet (its
    summary will carry the run's error tag, which says the same)."""
    with engine.begin() as conn:
        return conn.execute(task_executions.update().where(T.run_id == run_id).values(error=error)).rowcount > 0


def recorded_run_ids(conn: sa.Connection, run_ids: Iterable[str]) -> set[str]:
    ids = list(run_ids)
    found: set[str] = set()
    for start in range(0, len(ids), _READ_CHUNK):
        found |= set(conn.execute(sa.select(T.run_id).where(T.run_id.in_(ids[start:start + _READ_CHUNK]))).scalars())
    return found


def task_ids(conn: sa.Connection, task_names: Iterable[str]) -> dict[str, int]:
    """The registry ids of the tasks with these names (those that exist)."""
    names = sorted(set(task_names))
    if not names:
        return {}
    c = scheduled_tasks.c
    return dict(conn.execute(sa.select(c.task_name, c.id).where(c.task_name.in_(names))).all())


def recorded_through(conn: sa.Connection) -> dt.datetime | None:
    value = conn.execute(sa.select(registry_meta.c.value).where(registry_meta.c.key == RECORDED_THROUGH_KEY)).scalar()
    return dt.datetime.fromisoformat(value) if value else None


def advance_recorded_through(engine: sa.Engine, moment: dt.datetime) -> None:
    """Move the mark forward to `moment` (never back: two backfill passes may race)."""
    # One fixed format (microseconds always written), so the strings order like the instants they name.
    value = moment.astimezone(dt.UTC).isoformat(timespec="microseconds")
    statement = insert(registry_meta).values(key=RECORDED_THROUGH_KEY, value=value)
    statement = statement.on_conflict_do_update(
        index_elements=[registry_meta.c.key],
        set_={"value": value, "updated_at": sa.func.now()},
        where=registry_meta.c.value < value,
    )
    with engine.begin() as conn:
        conn.execute(statement)


@dataclass(frozen=True)
class HistoryFilter:
    """What /executions and the per-task view select: all optional; the time range is on `triggered_at`."""

    task_name: str | None = None
    service: str | None = None
    status: str | None = None
    since: dt.datetime | None = None  # inclusive
    until: dt.datetime | None = None  # exclusive

    def where(self) -> list[sa.ColumnElement[bool]]:
        clauses = []
        if self.task_name is not None:
            clauses.append(T.task_name == self.task_name)
        if self.service is not None:
            clauses.append(T.service == self.service)
        if self.status is not None:
            clauses.append(T.status == self.status)
        if self.since is not None:
            clauses.append(T.triggered_at >= self.since)
        if self.until is not None:
            clauses.append(T.triggered_at < self.until)
        return clauses


def newest_rows(conn: sa.Connection, selection: HistoryFilter, before: tuple[dt.datetime, str] | None,
                limit: int) -> list[sa.Row]:
    """Rows newest first by (triggered_at, run_id), strictly before the key `before`."""
    query = sa.select(task_executions).where(*selection.where())
    if before is not None:
        query = query.where(sa.tuple_(T.triggered_at, T.run_id) < sa.tuple_(sa.literal(before[0]),
                                                                             sa.literal(before[1])))
    return list(conn.execute(query.order_by(T.triggered_at.desc(), T.run_id.desc()).limit(limit)))


def rows_for_runs(conn: sa.Connection, run_ids: Sequence[str]) -> dict[str, sa.Row]:
    rows: dict[str, sa.Row] = {}
    for start in range(0, len(run_ids), _READ_CHUNK):
        chunk = list(run_ids[start:start + _READ_CHUNK])
        rows |= {row.run_id: row for row in conn.execute(sa.select(task_executions).where(T.run_id.in_(chunk)))}
    return rows


def task_rows(conn: sa.Connection, task_name: str, since: dt.datetime, until: dt.datetime) -> list[sa.Row]:
    """A task's rows triggered in [since, until), or scheduled for a minute in it (a late catch-up), oldest first."""
    query = sa.select(task_executions).where(
        T.task_name == task_name,
        sa.or_(sa.and_(T.triggered_at >= since, T.triggered_at < until),
               sa.and_(T.scheduled_for >= since, T.scheduled_for < until)),
    ).order_by(T.triggered_at, T.run_id)
    return list(conn.execute(query))


# --- the dispatcher's skipped minutes --------------------------------------------------------------------------------


def record_skip(engine: sa.Engine, skipped_from: dt.datetime, skipped_until: dt.datetime, reason: str) -> None:
    """Record that the real minutes [skipped_from, skipped_until) were not evaluated, and why (idempotent)."""
    statement = insert(dispatch_skips).values(skipped_from=skipped_from, skipped_until=skipped_until, reason=reason)
    with engine.begin() as conn:
        conn.execute(statement.on_conflict_do_nothing(constraint="uq_dispatch_skips_range"))


@dataclass(frozen=True)
class Skip:
    skipped_from: dt.datetime
    skipped_until: dt.datetime
    reason: str


def skips_between(conn: sa.Connection, since: dt.datetime, until: dt.datetime) -> list[Skip]:
    c = dispatch_skips.c
    rows = conn.execute(sa.select(c.skipped_from, c.skipped_until, c.reason)
                        .where(c.skipped_until > since, c.skipped_from < until).order_by(c.skipped_from))
    return [Skip(*row) for row in rows]
