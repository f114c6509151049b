"""What the history keeps of one ended maintenance run, read from Dagster: its tags, times and the op's events."""

from __future__ import annotations

import datetime as dt
import hashlib
import json
from collections.abc import Iterable, Mapping
from typing import Any

import dagster as dg
from pydantic import BaseModel

from maintenance_jobs.execution_history import tag_values
from maintenance_jobs.execution_history.execution_row import (  # noqa: F401 (this module's names before the split)
    ExecutionSummary,
    execution_id,
    from_timestamp,
    utc,
)

from maintenance_jobs.tags import (
    TAG_EXECUTOR,
    TAG_OUTPUT,
    TAG_PRIORITY,
    TAG_SCHEDULED_MINUTE,
    TAG_SERVICE,
    TAG_TASK,
    TAG_TRIGGERED_BY,
)
from orchestration_core.dagster_tags import PARENT_RUN_ID_TAG, RETRY_NUMBER_TAG
from orchestration_core.run_outcome import TAG_ERROR

# run monitoring's message when it cancels a run for exceeding dagster/max_runtime (the registry's `timeout`)
MAX_RUNTIME_MARKER = "exceeding maximum runtime"
# The op's metadata is kept whole up to this size as JSON; a bigger one keeps its keys and a note (a run's metadata
# is a few hundred bytes: counts, paths, commits).
MAX_METADATA_BYTES = 32_768
MAX_ERROR_CHARS = tag_values.MAX_TEXT_CHARS
_EVENT_TYPES = {
    dg.DagsterEventType.STEP_OUTPUT,
    dg.DagsterEventType.STEP_FAILURE,
    dg.DagsterEventType.RUN_CANCELING,
    dg.DagsterEventType.RUN_FAILURE,
}


def classify_run_end(status: dg.DagsterRunStatus, canceling_messages: Iterable[str]) -> str:
    """The registry status of a finished run: success, failed, timeout (max runtime exceeded) or canceled."""
    if any(MAX_RUNTIME_MARKER in (m or "") for m in canceling_messages):
        return "timeout"
    if status == dg.DagsterRunStatus.SUCCESS:
        return "success"
    if status == dg.DagsterRunStatus.CANCELED:
        return "canceled"
    return "failed"


def triggered_by(run: dg.DagsterRun) -> str | None:
    # Dagster's run retries copy the parent's tags (triggered_by=scheduler); the op re-tags its run as a retry, but a
    # retry that died before its op started still carries the copy.
    if run.parent_run_id or tag_values.run_id(run.tags.get(PARENT_RUN_ID_TAG)):
        return "retry"
    return tag_values.triggered_by(run.tags.get(TAG_TRIGGERED_BY))


def plain_metadata(entries: Mapping[str, Any]) -> dict[str, Any]:
    """Dagster metadata values as JSON values (a value JSON cannot carry becomes its text)."""
    plain: dict[str, Any] = {}
    for key, value in entries.items():
        raw = getattr(value, "value", value)
        if isinstance(raw, dg.MetadataValue):  # e.g. a table value: keep its text
            raw = str(raw)
        plain[str(key)] = json.loads(json.dumps(raw, default=str))
    size = len(json.dumps(plain))
    if size > MAX_METADATA_BYTES:
        return {"truncated": f"{size} bytes of metadata, over {MAX_METADATA_BYTES}", "keys": sorted(plain)}
    return plain


def summarize(instance: dg.DagsterInstance, record: dg.RunRecord) -> ExecutionSummary:
    """The history row of a finished run (one read of its relevant events)."""
    run = record.dagster_run
    tags = run.tags
    events = [r.event_log_entry.dagster_event for r in
              instance.get_records_for_run(run.run_id, of_type=_EVENT_TYPES).records if r.event_log_entry.dagster_event]
    canceling = [e.message or "" for e in events if e.event_type == dg.DagsterEventType.RUN_CANCELING]
    metadata: dict[str, Any] = {}
    failure_messages: list[str] = []
    for event in events:
        if event.event_type == dg.DagsterEventType.STEP_OUTPUT:
            metadata.update(event.step_output_data.metadata)
        elif event.event_type == dg.DagsterEventType.STEP_FAILURE:
            data = event.step_failure_data
            if data.user_failure_data is not None:
                metadata.update(data.user_failure_data.metadata)
                failure_messages.append(data.user_failure_data.description or "")
            elif data.error is not None:
                failure_messages.append(data.error.message.strip())
        elif event.event_type == dg.DagsterEventType.RUN_FAILURE:
            failure_messages.append(event.message or "")
    status = classify_run_end(run.status, canceling)
    started, ended = record.start_time, record.end_time
    duration = round(ended - started, 3) if started and ended else None
    # Tags are read through tag_values: any value a run's launcher chose must still make a storable row.
    error = tags.get(TAG_ERROR)
    if not error and status != "success":
        error = next((m for m in failure_messages if m), None) or next((m for m in canceling if m), None)
    return ExecutionSummary(
        id=execution_id(run.run_id),
        run_id=run.run_id,
        task_name=tag_values.label(tags.get(TAG_TASK) or run.job_name),
        has_task=bool(tags.get(TAG_TASK)),
        service=tag_values.label(tags.get(TAG_SERVICE)),
        executor=tag_values.label(tags.get(TAG_EXECUTOR)),
        priority=tag_values.priority(tags.get(TAG_PRIORITY)),
        status=status,
        triggered_by=triggered_by(run),
        triggered_at=utc(record.create_timestamp),
        started_at=from_timestamp(started),
        completed_at=from_timestamp(ended),
        duration_seconds=duration,
        output=tag_values.text(tags.get(TAG_OUTPUT)),
        error=error[:MAX_ERROR_CHARS] if error else None,
        retry_count=tag_values.retry_number(tags.get(RETRY_NUMBER_TAG)),
        metadata=plain_metadata(metadata),
        scheduled_for=tag_values.scheduled_minute(tags.get(TAG_SCHEDULED_MINUTE)),
        parent_run_id=run.parent_run_id or tag_values.run_id(tags.get(PARENT_RUN_ID_TAG)),
        job_name=run.job_name,
        dagster_status=run.status.value,
    )


__all__ = ["ExecutionSummary", "classify_run_end", "execution_id", "summarize"]
