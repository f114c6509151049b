"""One execution as the REST API and the CLI show it, built from a history row or from a run still in storage."""

from __future__ import annotations

import datetime as dt
from collections.abc import Mapping
from typing import Any

import sqlalchemy as sa
from pydantic import BaseModel, Field

from maintenance_jobs.execution_history import tag_values
from maintenance_jobs.execution_history.run_storage import RunRow
from maintenance_jobs.execution_history.execution_row import execution_id, from_timestamp, utc
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
from orchestration_core.dagster_tags import PARENT_RUN_ID_TAG, RETRY_NUMBER_TAG
from orchestration_core.run_outcome import TAG_ERROR
from orchestration_core.run_status import RunStatus as S, status_value

EXECUTION_STATUSES = ("pending", "running", "success", "failed", "timeout", "canceled")
DAGSTER_STATUSES: dict[str, list[S]] = {
    "pending": [S.QUEUED, S.NOT_STARTED, S.STARTING, S.MANAGED],
    "running": [S.STARTED, S.CANCELING],
    "success": [S.SUCCESS],
    "failed": [S.FAILURE],
    "canceled": [S.CANCELED],
    "timeout": [S.FAILURE, S.CANCELED],
}
_FINISHED_TAG_STATUSES = {"success", "failed", "timeout", "canceled"}


class ExecutionItem(BaseModel):
    """An execution: the old scheduler's `task_executions` fields plus its Dagster run."""

    id: int = Field(description="stable id of the execution (the same while its run is live and once recorded)")
    run_id: str
    task_id: int | None = Field(description="the registry task's id (when the run ended, once recorded); null when "
                                "no task of that name exists")
    task_name: str
    service: str | None
    executor: str | None
    priority: int | None
    status: str = Field(description="pending, running, success, failed, timeout or canceled")
    triggered_by: str | None = Field(description="scheduler, manual or retry")
    triggered_at: dt.datetime = Field(description="when the run was created (queued)")
    started_at: dt.datetime | None
    completed_at: dt.datetime | None
    duration_seconds: float | None
    output: str | None
    error: str | None
    retry_count: int = Field(description="the attempt's retry number: 0 for a first attempt, n for the n-th retry")
    metadata: dict[str, Any] = Field(description="the op's output (or failure) metadata; {} until recorded")
    scheduled_for: dt.datetime | None = Field(description="the cron minute a scheduled run (and its retries) is for")
    parent_run_id: str | None = Field(description="the run this one retries")
    recorded: bool = Field(description="the summary is in the execution history (false while live or just ended)")
    job_name: str
    dagster_status: str
    run_pruned: bool = Field(description="the Dagster run was deleted by retention: only this summary remains")
    dagster_url: str | None = Field(description="the run in the Dagster UI; null once the run was pruned")

    @property
    def key(self) -> tuple[dt.datetime, str]:
        return self.triggered_at, self.run_id


def execution_status(status: S | object, tags: Mapping[str, str]) -> str:
    """The old scheduler's status of a run (a DagsterRunStatus or its value); a finished run's `maintenance/status`
    tag (timeout!) wins."""
    status = S(status_value(status))
    if status in (S.SUCCESS, S.FAILURE, S.CANCELED) and tags.get(TAG_STATUS) in _FINISHED_TAG_STATUSES:
        return tags[TAG_STATUS]
    for name in ("pending", "running", "success", "failed", "canceled"):
        if status in DAGSTER_STATUSES[name]:
            return name
    return "failed"


def run_url(ui_url: str, run_id: str) -> str:
    return f"{ui_url}/runs/{run_id}"


def item_from_run(row: RunRow, ui_url: str) -> ExecutionItem:
    """A run not recorded yet (live, or ended moments ago), from run storage; its tags read as the history writer
    reads them (tag_values), so one run's tags cannot break a page."""
    tags = row.tags
    duration = row.end_time - row.start_time if row.start_time and row.end_time else None
    parent = tag_values.run_id(tags.get(PARENT_RUN_ID_TAG))
    return ExecutionItem(
        id=execution_id(row.run_id),
        run_id=row.run_id,
        task_id=None,
        task_name=tag_values.label(tags.get(TAG_TASK) or row.job_name),
        service=tag_values.label(tags.get(TAG_SERVICE)),
        executor=tag_values.label(tags.get(TAG_EXECUTOR)),
        priority=tag_values.priority(tags.get(TAG_PRIORITY)),
        status=execution_status(row.status, tags),
        triggered_by="retry" if parent else tag_values.triggered_by(tags.get(TAG_TRIGGERED_BY)),
        triggered_at=row.created,
        started_at=from_timestamp(row.start_time),
        completed_at=from_timestamp(row.end_time),
        duration_seconds=round(duration, 3) if duration is not None else None,
        output=tag_values.text(tags.get(TAG_OUTPUT)),
        error=tag_values.text(tags.get(TAG_ERROR)),
        retry_count=tag_values.retry_number(tags.get(RETRY_NUMBER_TAG)),
        metadata={},
        scheduled_for=tag_values.scheduled_minute(tags.get(TAG_SCHEDULED_MINUTE)),
        parent_run_id=parent,
        recorded=False,
        job_name=row.job_name,
        dagster_status=row.status.value,
        run_pruned=False,
        dagster_url=run_url(ui_url, row.run_id),
    )


def item_from_history(row: sa.Row, ui_url: str, run_exists: bool) -> ExecutionItem:
    """A recorded execution; its run link only while the run is still in storage."""
    data = dict(row._mapping)
    return ExecutionItem(
        **{name: data[name] for name in (
            "id", "run_id", "task_id", "task_name", "service", "executor", "priority", "status", "triggered_by",
            "duration_seconds", "output", "error", "retry_count", "metadata", "parent_run_id", "job_name",
            "dagster_status")},
        triggered_at=utc(data["triggered_at"]),
        started_at=utc(data["started_at"]) if data["started_at"] else None,
        completed_at=utc(data["completed_at"]) if data["completed_at"] else None,
        scheduled_for=utc(data["scheduled_for"]) if data["scheduled_for"] else None,
        recorded=True,
        run_pruned=not run_exists,
        dagster_url=run_url(ui_url, data["run_id"]) if run_exists else None,
    )
