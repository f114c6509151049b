"""The run-storage side of the history: maintenance runs that may not be recorded yet, read with a few indexed SQL
queries on Dagster's `runs` and `run_tags` tables (the columns and tags shown, never the serialised run bodies).

Which runs: those in progress (Dagster's status index), and those that ended (last updated) at or after the
registry's recorded-through mark. Every maintenance run that ended before the mark is in the history, so a page
never walks the tens of thousands of recorded runs still in storage. Before the first backfill pass has set the mark
(a fresh install, an upgrade) it is every maintenance run, read the slow way until the history has caught up.

Both sides order by the same key, (created time, run id), newest first: a run keeps its place when it ends, is
recorded or is deleted by retention, which is what lets /executions merge them without gaps or repeats.

Each read takes `storage`, anything whose `connect()` gives a SQLAlchemy connection to those tables: the control
API's engine on Dagster's Postgres (it does not import Dagster), or a Dagster instance's SQL run storage (the code
location's sensors; an instance stands for its run storage).
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Mapping, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass
from typing import Protocol

import sqlalchemy as sa

from maintenance_jobs.execution_history.execution_row import utc
from maintenance_jobs.tags import (
    TAG_EXECUTOR,
    TAG_OUTPUT,
    TAG_PRIORITY,
    TAG_SCHEDULED_MINUTE,
    TAG_SERVICE,
    TAG_STATUS,
    TAG_TASK,
    TAG_TRIGGERED_BY,
)
from orchestration_core.audit.execution_history import TAG_HISTORY_RECORDED
from orchestration_core.dagster_schema import run_tags, runs as runs_table
from orchestration_core.dagster_tags import PARENT_RUN_ID_TAG, RETRY_NUMBER_TAG
from orchestration_core.run_outcome import KIND_MAINTENANCE, TAG_ERROR, TAG_KIND
from orchestration_core.run_status import ENDED, IN_PROGRESS, RunStatus, run_status
# The tags an item shows (and the status and retry checks read).
ITEM_TAGS = (TAG_TASK, TAG_SERVICE, TAG_EXECUTOR, TAG_PRIORITY, TAG_STATUS, TAG_TRIGGERED_BY, TAG_OUTPUT, TAG_ERROR,
             RETRY_NUMBER_TAG, TAG_SCHEDULED_MINUTE, PARENT_RUN_ID_TAG)
R = runs_table.c


class RunStorage(Protocol):
    """An engine on Dagster's storage database, or a Dagster SQL run storage: both `connect()`."""

    def connect(self) -> AbstractContextManager[sa.Connection]: ...


@dataclass(frozen=True)
class RunRow:
    """The columns and tags of one run that an execution item shows."""

    run_id: str
    job_name: str
    status: RunStatus
    created: dt.datetime  # aware UTC: the history's triggered_at
    start_time: float | None
    end_time: float | None
    tags: Mapping[str, str]

    @property
    def key(self) -> tuple[dt.datetime, str]:
        return self.created, self.run_id


@dataclass(frozen=True)
class RunSelection:
    """Filters of the live side (the history side's HistoryFilter, in run-storage terms)."""

    task_name: str | None = None
    service: str | None = None
    statuses: Sequence[RunStatus] | None = None  # or DagsterRunStatus members
    since: dt.datetime | None = None
    until: dt.datetime | None = None


def _storage(storage: RunStorage) -> RunStorage:
    """`storage` if it is a SQL one (a Dagster instance stands for its run storage): its public `connect()` gives a
    SQLAlchemy connection to Dagster's tables."""
    storage = getattr(storage, "run_storage", storage)
    if not callable(getattr(storage, "connect", None)):
        raise TypeError(f"the execution history needs SQL run storage, not {type(storage).__name__}")
    return storage


def connect(storage: RunStorage) -> AbstractContextManager[sa.Connection]:
    """A connection to Dagster's tables through `storage` (an engine, a SQL run storage, or an instance)."""
    return _storage(storage).connect()


def _naive(moment: dt.datetime) -> dt.datetime:
    # Dagster's timestamp columns hold naive UTC.
    return moment.astimezone(dt.UTC).replace(tzinfo=None)


def _tagged(table: sa.FromClause, key: str, value: str) -> sa.FromClause:
    tags = sa.alias(run_tags)  # SQLAlchemy names each alias of the table apart
    return table.join(tags, sa.and_(tags.c.run_id == R.run_id, tags.c.key == key, tags.c.value == value))


def _maintenance_runs(selection: RunSelection) -> sa.FromClause:
    table = _tagged(runs_table, TAG_KIND, KIND_MAINTENANCE)
    if selection.task_name is not None:
        table = _tagged(table, TAG_TASK, selection.task_name)
    if selection.service is not None:
        table = _tagged(table, TAG_SERVICE, selection.service)
    return table


def _not_yet_recorded(recorded_through: dt.datetime | None) -> sa.ColumnElement[bool]:
    if recorded_through is None:
        return sa.true()
    return sa.or_(R.status.in_([s.value for s in IN_PROGRESS]),
                  sa.and_(R.status.in_([s.value for s in ENDED]), R.update_timestamp >= _naive(recorded_through)))


def live_rows(storage: RunStorage, selection: RunSelection, recorded_through: dt.datetime | None,
              before: tuple[dt.datetime, str] | None, limit: int) -> list[RunRow]:
    """Maintenance runs that may not be in the history yet, newest first by (created, run id), strictly before
    `before`; the caller drops those the history already holds."""
    storage = _storage(storage)
    query = (sa.select(R.run_id, R.pipeline_name, R.status, R.create_timestamp, R.start_time, R.end_time)
             .select_from(_maintenance_runs(selection)).where(_not_yet_recorded(recorded_through)))
    if selection.statuses:
        query = query.where(R.status.in_([str(getattr(s, "value", s)) for s in selection.statuses]))
    if selection.since is not None:
        query = query.where(R.create_timestamp >= _naive(selection.since))
    if selection.until is not None:
        query = query.where(R.create_timestamp < _naive(selection.until))
    if before is not None:
        query = query.where(sa.tuple_(R.create_timestamp, R.run_id) < sa.tuple_(sa.literal(_naive(before[0])),
                                                                                sa.literal(before[1])))
    query = query.order_by(R.create_timestamp.desc(), R.run_id.desc()).limit(limit)
    with storage.connect() as conn:
        runs = conn.execute(query).all()
        tags = _item_tags(conn, [run.run_id for run in runs])
    return [RunRow(run.run_id, run.pipeline_name, run_status(run.status), utc(run.create_timestamp), run.start_time,
                   run.end_time, tags[run.run_id]) for run in runs]


def _item_tags(conn: sa.Connection, run_ids: list[str]) -> dict[str, dict[str, str]]:
    tags: dict[str, dict[str, str]] = {run_id: {} for run_id in run_ids}
    if run_ids:
        rows = conn.execute(sa.select(run_tags.c.run_id, run_tags.c.key, run_tags.c.value)
                            .where(run_tags.c.run_id.in_(run_ids), run_tags.c.key.in_(ITEM_TAGS)))
        for run_id, key, value in rows:
            tags[run_id][key] = value
    return tags


def existing_run_ids(storage: RunStorage, run_ids: Sequence[str]) -> set[str]:
    """Which of `run_ids` are still in run storage (one indexed query): the history's run links."""
    if not run_ids:
        return set()
    with _storage(storage).connect() as conn:
        return set(conn.execute(sa.select(R.run_id).where(R.run_id.in_(list(run_ids)))).scalars())


@dataclass(frozen=True)
class EndedRun:
    run_id: str
    updated: dt.datetime  # aware UTC


def unrecorded_ended_runs(storage: RunStorage, recorded_through: dt.datetime | None,
                          limit: int) -> list[EndedRun]:
    """Ended maintenance runs last updated at or after the mark (any, without one) whose summary is not marked
    recorded on the run itself, oldest update first: what the backfill pass records."""
    recorded = sa.alias(run_tags)
    table = _maintenance_runs(RunSelection()).outerjoin(
        recorded, sa.and_(recorded.c.run_id == R.run_id, recorded.c.key == TAG_HISTORY_RECORDED))
    query = (sa.select(R.run_id, R.update_timestamp).select_from(table)
             .where(R.status.in_([s.value for s in ENDED]))
             .where(sa.or_(recorded.c.value.is_(None), recorded.c.value != R.run_id)))
    if recorded_through is not None:
        query = query.where(R.update_timestamp >= _naive(recorded_through))
    query = query.order_by(R.update_timestamp, R.run_id).limit(limit)
    with _storage(storage).connect() as conn:
        return [EndedRun(run_id, utc(updated)) for run_id, updated in conn.execute(query)]
