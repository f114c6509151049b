"""`GET /executions`: maintenance runs read straight from Dagster run storage, in the old scheduler's shape.

Paging: the cursor is `<run id>:<created unix time>` of the last item of the previous page. Dagster's own cursor is
a run id (`id < id of that run`), which silently yields an empty page once that run is deleted (e.g. by the
retention job). So when the cursor's run no longer exists, the page re-anchors on its created time
(`created_before`) and continues where it was. Runs created in the very same microsecond as a deleted cursor run
could be skipped; run ids and microsecond timestamps make that practically impossible.

Speed: on SQL run storage (Postgres in every deployment) a page reads only the run columns and the tags it shows,
with Dagster's own query builder for the filters and cursor, instead of `get_run_records`, which deserialises every
run body (snapshot ids, execution plan, all tags): at 100k runs a page of 20 took ~11 ms instead of ~25 ms over HTTP
(BENCHMARKS.md). Other run storages take the public API; both paths build the same page (tested side by side).
"""

from __future__ import annotations

import datetime as dt
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass

import dagster as dg
import sqlalchemy as sa
from pydantic import BaseModel

from maintenance_jobs.tags import (
    TAG_EXECUTOR,
    TAG_OUTPUT,
    TAG_PRIORITY,
    TAG_SERVICE,
    TAG_STATUS,
    TAG_TASK,
    TAG_TRIGGERED_BY,
)
from orchestration_core.dagster_internals import RunTagsTable, SqlRunStorage
from orchestration_core.run_outcome import KIND_MAINTENANCE, TAG_ERROR, TAG_KIND

S = dg.DagsterRunStatus
EXECUTION_STATUSES = ("pending", "running", "success", "failed", "timeout", "canceled")
_DAGSTER_STATUSES: dict[str, list[dg.DagsterRunStatus]] = {
    "pending": [S.QUEUED, S.NOT_STARTED, S.STARTING],
    "running": [S.STARTED, S.CANCELING],
    "success": [S.SUCCESS],
    "failed": [S.FAILURE],
    "canceled": [S.CANCELED],
    "timeout": [S.FAILURE, S.CANCELED],
}
_FINISHED_TAG_STATUSES = {"success", "failed", "timeout", "canceled"}
_CURSOR = re.compile(r"(?P<run_id>[A-Za-z0-9_-]{1,255}):(?P<created>[0-9]{1,17})")  # fullmatch, not `$`
# The same rule for the query parameter's schema (pydantic-core's regex: `$` is the end of the text).
CURSOR_PATTERN = "^[A-Za-z0-9_-]{1,255}:[0-9]{1,17}$"
_EPOCH = dt.datetime(1970, 1, 1, tzinfo=dt.UTC)
_MICROSECOND = dt.timedelta(microseconds=1)
TAG_RETRY_NUMBER = "dagster/retry_number"


class CursorError(ValueError):
    """A malformed `cursor` query parameter."""


class ExecutionItem(BaseModel):
    run_id: str
    task_name: str
    service: str | None
    executor: str | None
    priority: int | None
    status: str
    triggered_by: str | None
    triggered_at: dt.datetime
    started_at: dt.datetime | None
    completed_at: dt.datetime | None
    duration_seconds: float | None
    output: str | None
    error: str | None
    retry_count: int
    job_name: str
    dagster_status: str
    dagster_url: str


class ExecutionPage(BaseModel):
    """One page; GET /executions answers `items` as its body and `next_cursor` in its Link header."""

    items: list[ExecutionItem]
    next_cursor: str | None
    limit: int


def execution_status(status: dg.DagsterRunStatus, tags: Mapping[str, str]) -> str:
    """The old scheduler's status of a run; a finished run's `maintenance/status` tag (timeout!) wins."""
    if status in (S.SUCCESS, S.FAILURE, S.CANCELED) and tags.get(TAG_STATUS) in _FINISHED_TAG_STATUSES:
        return tags[TAG_STATUS]
    for name in ("pending", "running", "success", "failed", "canceled"):
        if status in _DAGSTER_STATUSES[name]:
            return name
    return "failed"


def encode_cursor(run_id: str, created: dt.datetime) -> str:
    # Integer microseconds: a float would round the anchor of a deleted cursor run.
    return f"{run_id}:{(_utc(created) - _EPOCH) // _MICROSECOND}"


def decode_cursor(cursor: str) -> tuple[str, dt.datetime]:
    match = _CURSOR.fullmatch(cursor)
    if not match:
        raise CursorError("cursor: malformed; follow the previous page's Link header (rel=\"next\") unchanged")
    return match["run_id"], _EPOCH + int(match["created"]) * _MICROSECOND


def _utc(moment: dt.datetime) -> dt.datetime:
    # Run storage returns naive UTC (Postgres) or aware datetimes.
    return moment.replace(tzinfo=dt.UTC) if moment.tzinfo is None else moment.astimezone(dt.UTC)


def _int(value: str | None) -> int | None:
    try:
        return int(value) if value is not None else None
    except ValueError:
        return None


def _when(timestamp: float | None) -> dt.datetime | None:
    return dt.datetime.fromtimestamp(timestamp, dt.UTC) if timestamp else None


@dataclass(frozen=True)
class RunRow:
    """The columns and tags of one run that an execution item shows."""

    run_id: str
    job_name: str
    status: dg.DagsterRunStatus
    created: dt.datetime
    start_time: float | None
    end_time: float | None
    tags: Mapping[str, str]

    @classmethod
    def from_record(cls, record: dg.RunRecord) -> RunRow:
        run = record.dagster_run
        return cls(run.run_id, run.job_name, run.status, record.create_timestamp, record.start_time, record.end_time,
                   run.tags)


# The tags an item shows (and the status check reads); the SQL path fetches only these.
ITEM_TAGS = (TAG_TASK, TAG_SERVICE, TAG_EXECUTOR, TAG_PRIORITY, TAG_STATUS, TAG_TRIGGERED_BY, TAG_OUTPUT, TAG_ERROR,
             TAG_RETRY_NUMBER)
_RUN_COLUMNS = ["run_id", "pipeline_name", "status", "create_timestamp", "start_time", "end_time"]


def to_item(row: RunRow, ui_url: str) -> ExecutionItem:
    tags = row.tags
    duration = row.end_time - row.start_time if row.start_time and row.end_time else None
    return ExecutionItem(
        run_id=row.run_id,
        task_name=tags.get(TAG_TASK) or row.job_name,
        service=tags.get(TAG_SERVICE),
        executor=tags.get(TAG_EXECUTOR),
        priority=_int(tags.get(TAG_PRIORITY)),
        status=execution_status(row.status, tags),
        triggered_by=tags.get(TAG_TRIGGERED_BY),
        triggered_at=_utc(row.created),
        started_at=_when(row.start_time),
        completed_at=_when(row.end_time),
        duration_seconds=round(duration, 3) if duration is not None else None,
        output=tags.get(TAG_OUTPUT),
        error=tags.get(TAG_ERROR),
        retry_count=_int(tags.get(TAG_RETRY_NUMBER)) or 0,
        job_name=row.job_name,
        dagster_status=row.status.value,
        dagster_url=f"{ui_url}/runs/{row.run_id}",
    )


def _rows_via_sql(storage: SqlRunStorage, filters: dg.RunsFilter, limit: int, cursor: str | None) -> list[RunRow]:
    # Dagster's own builder (tag joins, status/created filters, `id < id of cursor run`, newest first), minus run_body.
    query = storage._runs_query(filters=filters, cursor=cursor, limit=limit, columns=_RUN_COLUMNS)  # noqa: SLF001
    with storage.connect() as conn:
        # A newest-first LIMIT page reads a few hundred index entries, but with a status filter Postgres plans a
        # parallel Gather Merge whose worker start-up (~15 ms) costs more than the scan. Dagster's storage
        # connections are autocommit (no SET LOCAL), so the setting is reset before the pooled connection goes back.
        serial = bool(filters.statuses) and conn.dialect.name == "postgresql"
        if serial:
            conn.execute(sa.text("SET max_parallel_workers_per_gather = 0"))
        try:
            runs = conn.execute(query).all()
        finally:
            if serial:
                conn.execute(sa.text("RESET max_parallel_workers_per_gather"))
        tags: dict[str, dict[str, str]] = {run.run_id: {} for run in runs}
        if runs:
            tag_rows = conn.execute(
                sa.select(RunTagsTable.c.run_id, RunTagsTable.c.key, RunTagsTable.c.value).where(
                    RunTagsTable.c.run_id.in_(list(tags)), RunTagsTable.c.key.in_(ITEM_TAGS)))
            for run_id, key, value in tag_rows:
                tags[run_id][key] = value
    return [RunRow(run.run_id, run.pipeline_name, dg.DagsterRunStatus(run.status), run.create_timestamp,
                   run.start_time, run.end_time, tags[run.run_id]) for run in runs]


def fetch_rows(instance: dg.DagsterInstance, filters: dg.RunsFilter, limit: int, cursor: str | None,
               *, use_sql: bool | None = None) -> list[RunRow]:
    """Newest-first runs matching `filters` after the storage cursor (a run id); SQL when the storage allows."""
    storage = instance.run_storage
    if use_sql if use_sql is not None else isinstance(storage, SqlRunStorage):
        return _rows_via_sql(storage, filters, limit, cursor)  # type: ignore[arg-type]
    return [RunRow.from_record(r) for r in instance.get_run_records(filters=filters, limit=limit, cursor=cursor)]


@dataclass(frozen=True)
class ExecutionQuery:
    task_name: str | None = None
    service: str | None = None
    status: str | None = None
    limit: int = 20
    cursor: str | None = None

    def runs_filter(self, created_before: dt.datetime | None) -> dg.RunsFilter:
        tags = {TAG_KIND: KIND_MAINTENANCE}
        if self.task_name is not None:
            tags[TAG_TASK] = self.task_name
        if self.service is not None:
            tags[TAG_SERVICE] = self.service
        if self.status == "timeout":
            tags[TAG_STATUS] = "timeout"
        statuses = _DAGSTER_STATUSES[self.status] if self.status else None
        return dg.RunsFilter(tags=tags, statuses=statuses, created_before=created_before)


def list_executions(instance: dg.DagsterInstance, query: ExecutionQuery, ui_url: str,
                    *, use_sql: bool | None = None) -> ExecutionPage:
    """One page of executions, newest first; indexed tag/status filters, then an exact status check.

    The exact check only drops runs whose recorded status differs from what their Dagster status suggests (a
    failure recorded as a timeout), so the loop almost always ends after one fetch of `limit + 1` records.
    """
    storage_cursor: str | None = None
    created_before: dt.datetime | None = None
    if query.cursor:
        run_id, created = decode_cursor(query.cursor)
        if instance.has_run(run_id):
            storage_cursor = run_id
        else:
            created_before = created  # the cursor run was deleted: continue by its created time
    filters = query.runs_filter(created_before)
    keep: Callable[[ExecutionItem], bool] = (lambda i: i.status == query.status) if query.status else (lambda i: True)
    items: list[ExecutionItem] = []
    batch = query.limit + 1
    while len(items) <= query.limit:
        rows = fetch_rows(instance, filters, batch, storage_cursor, use_sql=use_sql)
        items.extend(item for item in (to_item(r, ui_url) for r in rows) if keep(item))
        if len(rows) < batch:
            break
        storage_cursor = rows[-1].run_id
    page = items[: query.limit]
    more = len(items) > query.limit
    next_cursor = encode_cursor(page[-1].run_id, page[-1].triggered_at) if more and page else None
    return ExecutionPage(items=page, next_cursor=next_cursor, limit=query.limit)
