"""`GET /executions`: every maintenance execution, newest first, from two sources merged into one list.

- The execution history (`task_executions` in the registry): every ended run, recorded once when it ends, kept for
  MAINTENANCE_HISTORY_DAYS (default forever), whatever Dagster's run retention has deleted since.
- Dagster's run storage: the runs not recorded yet (queued, running, or ended moments ago), read with indexed queries
  (maintenance_jobs.execution_history.run_storage).

Both are ordered by one key, (triggered_at = the run's created time, run id), and the cursor is the last item's key
(`<run id>:<created unix microseconds>`). A page takes the first `limit + 1` of each source strictly after the cursor,
merges them and keeps `limit`: every item of the true page is among the first `limit + 1` of its own source. A run
keeps its key when it ends, is recorded or is deleted by retention, so runs that change state while a client pages
are neither skipped nor repeated; a run started after the first page has a newer key and appears on a fresh first
page. The run storage is read before the history: a run recorded in between is found in the history (the storage rows
already recorded are shown from the history too), and a run is only ever deleted once it is recorded.

A recorded item links to its Dagster run while that run still exists (`dagster_url`) and says `run_pruned: true`
once retention has deleted it.
"""

from __future__ import annotations

import datetime as dt
import re
import threading
import time
from dataclasses import dataclass

import sqlalchemy as sa
from pydantic import BaseModel

from maintenance_jobs.execution_history import store
from maintenance_jobs.execution_history.items import (
    DAGSTER_STATUSES,
    EXECUTION_STATUSES,
    ExecutionItem,
    execution_status,
    item_from_history,
    item_from_run,
)
from maintenance_jobs.execution_history.execution_row import utc
from maintenance_jobs.execution_history.run_storage import RunSelection, RunStorage, existing_run_ids, live_rows

__all__ = ["CURSOR_PATTERN", "EXECUTION_STATUSES", "CursorError", "ExecutionItem", "ExecutionPage", "ExecutionQuery",
           "execution_status", "list_executions"]

_CURSOR = re.compile(r"(?P<run_id>[A-Za-z0-9_-]{1,255}):(?P<created>[0-9]{1,17})")  # fullmatch, not `$`
# The same rule for the query parameter's schema (pydantic-core's regex: `$` is the end of the text).
CURSOR_PATTERN = "^[A-Za-z0-9_-]{1,255}:[0-9]{1,17}$"
_EPOCH = dt.datetime(1970, 1, 1, tzinfo=dt.UTC)
_MICROSECOND = dt.timedelta(microseconds=1)


class RecordedThroughCache:
    """The registry's recorded-through mark, read at most every `seconds` per process and URL. Safe to serve stale: the
    mark only moves forward, and an older one only widens the run-storage side (by the runs ended since)."""

    def __init__(self, seconds: float = 5.0, clock=time.monotonic) -> None:
        self.seconds = seconds
        self._clock = clock
        self._marks: dict[str, tuple[float, dt.datetime | None]] = {}
        self._lock = threading.Lock()

    def get(self, conn: sa.Connection) -> dt.datetime | None:
        key = str(conn.engine.url)
        with self._lock:
            cached = self._marks.get(key)
        if cached is not None and self._clock() - cached[0] < self.seconds:
            return cached[1]
        read_at = self._clock()
        mark = store.recorded_through(conn)
        with self._lock:
            self._marks[key] = (read_at, mark)
        return mark


RECORDED_THROUGH = RecordedThroughCache()


class CursorError(ValueError):
    """A malformed `cursor` query parameter."""


class ExecutionPage(BaseModel):
    """One page; GET /executions answers `items` as its body and `next_cursor` in its Link header."""

    items: list[ExecutionItem]
    next_cursor: str | None
    limit: int


def encode_cursor(run_id: str, created: dt.datetime) -> str:
    # Integer microseconds: both sources store microseconds, and a float would round the key.
    return f"{run_id}:{(utc(created) - _EPOCH) // _MICROSECOND}"


def decode_cursor(cursor: str) -> tuple[str, dt.datetime]:
    """(run id, created) of the item the next page starts after."""
    match = _CURSOR.fullmatch(cursor)
    if not match:
        raise CursorError("cursor: malformed; follow the previous page's Link header (rel=\"next\") unchanged")
    return match["run_id"], _EPOCH + int(match["created"]) * _MICROSECOND


@dataclass(frozen=True)
class ExecutionQuery:
    task_name: str | None = None
    service: str | None = None
    status: str | None = None
    since: dt.datetime | None = None  # triggered at or after
    until: dt.datetime | None = None  # triggered before
    limit: int = 20
    cursor: str | None = None

    def history_filter(self) -> store.HistoryFilter:
        return store.HistoryFilter(self.task_name, self.service, self.status, self.since, self.until)

    def run_selection(self) -> RunSelection:
        statuses = DAGSTER_STATUSES[self.status] if self.status else None
        return RunSelection(self.task_name, self.service, statuses, self.since, self.until)


def _live_side(storage: RunStorage, conn: sa.Connection, query: ExecutionQuery,
               mark: dt.datetime | None, before: tuple[dt.datetime, str] | None, ui_url: str,
               need: int) -> tuple[list[ExecutionItem], set[str]]:
    """The first `need` items of the run-storage side (a run already recorded shown from the history), and the ids
    of the runs read, which exist."""
    items: list[ExecutionItem] = []
    seen: set[str] = set()
    selection = query.run_selection()
    while len(items) < need:
        rows = live_rows(storage, selection, mark, before, need)
        seen |= {row.run_id for row in rows}
        recorded = store.rows_for_runs(conn, [row.run_id for row in rows])
        live = [item_from_run(row, ui_url) for row in rows if row.run_id not in recorded]
        ids = store.task_ids(conn, [item.task_name for item in live])  # a live run's task as it is now
        live_by_id = {item.run_id: item.model_copy(update={"task_id": ids.get(item.task_name)}) for item in live}
        for row in rows:
            history = recorded.get(row.run_id)
            item = item_from_history(history, ui_url, True) if history else live_by_id[row.run_id]
            # The exact status (a recorded timeout, a failure tagged timeout) after the indexed Dagster-status filter.
            if query.status is None or item.status == query.status:
                items.append(item)
        if len(rows) < need:
            break
        before = rows[-1].key
    return items[:need], seen


def list_executions(storage: RunStorage, registry: sa.Engine, query: ExecutionQuery,
                    ui_url: str) -> ExecutionPage:
    """One page of executions, newest first, from Dagster's run storage (an engine on its database, or its run
    storage) and the history merged by (triggered_at, run id)."""
    before = None
    if query.cursor:
        run_id, created = decode_cursor(query.cursor)
        before = (created, run_id)
    need = query.limit + 1
    with registry.connect() as conn:
        mark = RECORDED_THROUGH.get(conn)
        live, existing = _live_side(storage, conn, query, mark, before, ui_url, need)
        history_rows = store.newest_rows(conn, query.history_filter(), before, need)
    unknown = [row.run_id for row in history_rows if row.run_id not in existing]
    existing |= existing_run_ids(storage, unknown)
    merged = {item.run_id: item for item in live}
    for row in history_rows:
        if row.run_id not in merged or not merged[row.run_id].recorded:  # recorded since the run-storage read
            merged[row.run_id] = item_from_history(row, ui_url, row.run_id in existing)
    ordered = sorted(merged.values(), key=lambda item: item.key, reverse=True)
    page = ordered[: query.limit]
    more = len(ordered) > query.limit
    next_cursor = encode_cursor(page[-1].run_id, page[-1].triggered_at) if more and page else None
    return ExecutionPage(items=page, next_cursor=next_cursor, limit=query.limit)
