"""One execution of the history as stored and shown: its row model, its stable id, and the time conversions of run
storage's values. Dagster-free: the control API imports it (summary.py builds the row from Dagster's run)."""

from __future__ import annotations

import datetime as dt
import hashlib
from typing import Any

from pydantic import BaseModel

# 53 bits: ids stay exact in JavaScript clients (Number.MAX_SAFE_INTEGER is 2**53 - 1).
_ID_BITS = 53


def execution_id(run_id: str, attempt: int = 0) -> int:
    """The execution's stable id: derived from the run id, so it is the same while the run is live and once recorded.

    `attempt` > 0 gives the alternatives the recorder tries should two run ids ever share an id (about one chance in
    10**9 at a million runs); the stored id is authoritative.
    """
    text = run_id if attempt == 0 else f"{run_id}#{attempt}"
    digest = hashlib.sha256(text.encode()).digest()
    return (int.from_bytes(digest[:8], "big") >> (64 - _ID_BITS)) or 1


class ExecutionSummary(BaseModel):
    """One `task_executions` row (the old scheduler's fields, plus what links it to Dagster)."""

    id: int
    run_id: str
    task_id: int | None = None  # filled in by the recorder from the registry
    task_name: str
    has_task: bool  # the run carries a task tag (the task row's last_status follows it)
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
    metadata: dict[str, Any]
    scheduled_for: dt.datetime | None
    parent_run_id: str | None
    job_name: str
    dagster_status: str

    def row(self) -> dict[str, Any]:
        return self.model_dump(exclude={"has_task"})


def utc(moment: dt.datetime) -> dt.datetime:
    """Run storage returns naive UTC (Postgres) or aware datetimes."""
    return moment.replace(tzinfo=dt.UTC) if moment.tzinfo is None else moment.astimezone(dt.UTC)


def from_timestamp(timestamp: float | None) -> dt.datetime | None:
    return dt.datetime.fromtimestamp(timestamp, dt.UTC) if timestamp else None
