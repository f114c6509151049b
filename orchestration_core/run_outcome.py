"""The audit trail's vocabulary: run tags every job writes so runs are filterable by outcome and item counts.

A run's outcome is first-class: `success`, `partial` (the run succeeded but some items failed for good) or
`failed`. It is written as the `racing/outcome` tag, so the UI, GraphQL and `RunsFilter(tags=...)` can filter it.
Runs that crashed before tagging themselves fall back to their Dagster status (see `outcome_of`).
"""

from __future__ import annotations

from collections.abc import Mapping
from enum import StrEnum

import dagster as dg

TAG_OUTCOME = "racing/outcome"
TAG_ITEMS_PROCESSED = "racing/items_processed"
TAG_ITEMS_FAILED = "racing/items_failed"
TAG_ERROR = "racing/error"
# Which side of the product a run belongs to; the run queue limits `maintenance` to 5 at once.
TAG_KIND = "orchestration/kind"
# A job that runs often and fails for the same outside reason every time (the card refresh during a TAB outage) tags
# its runs ALERT_ON_CHANGE: its failed and partial runs alert when the outcome changes, and its recovery alerts too.
TAG_ALERTS = "orchestration/alerts"
ALERT_ON_CHANGE = "on_change"
KIND_RACING = "racing"
KIND_MAINTENANCE = "maintenance"
# The maintenance task a run belongs to (maintenance_jobs.tags.TAG_TASK is this key); retention keeps each task's
# latest success, so it is named here, below both packages.
TAG_MAINTENANCE_TASK = "maintenance/task"
# Schedule metadata: how long its job may go without a success (seconds), for a schedule whose cron alone does not say
# (card_refresh skips its ticks once the day's last race has started). Read by the control API's overdue metrics.
EXPECTED_INTERVAL_METADATA = "orchestration/expected_interval_seconds"

_MAX_ERROR_TAG_CHARS = 500


class Outcome(StrEnum):
    SUCCESS = "success"
    PARTIAL = "partial"
    FAILED = "failed"


def classify_outcome(items_processed: int, items_failed: int) -> Outcome:
    """Success when nothing failed, failed when nothing succeeded, partial in between."""
    if items_failed <= 0:
        return Outcome.SUCCESS
    if items_processed <= 0:
        return Outcome.FAILED
    return Outcome.PARTIAL


def outcome_tags(outcome: Outcome, items_processed: int, items_failed: int, error: str | None = None) -> dict[str, str]:
    """Run tags recording an outcome (tag values must be strings)."""
    tags = {
        TAG_OUTCOME: outcome.value,
        TAG_ITEMS_PROCESSED: str(items_processed),
        TAG_ITEMS_FAILED: str(items_failed),
    }
    if error:
        tags[TAG_ERROR] = error[:_MAX_ERROR_TAG_CHARS]
    return tags


def failure_reason(instance: dg.DagsterInstance, run_id: str) -> str | None:
    """One line saying why a run failed, from its own events: the last step failure's error (the user code's error
    when Dagster wrapped it), else the run failure's message (a launch refused, a worker lost). None if neither."""
    steps = instance.get_records_for_run(run_id, of_type=dg.DagsterEventType.STEP_FAILURE, ascending=False,
                                         limit=1).records
    if steps and steps[0].event_log_entry.dagster_event is not None:
        error = steps[0].event_log_entry.dagster_event.step_failure_data.error
        if error is not None:
            cause = error.cause or error
            # Dagster's message is the exception's own `format_exception_only` text, which already starts with the
            # class name: prefixing `cls_name` showed "ValueError: ValueError: …".
            return one_line(cause.message)
    runs = instance.get_records_for_run(run_id, of_type=dg.DagsterEventType.RUN_FAILURE, ascending=False,
                                        limit=1).records
    if runs and runs[0].event_log_entry.dagster_event is not None:
        message = runs[0].event_log_entry.dagster_event.message or runs[0].event_log_entry.user_message
        return one_line(message) if message else None
    return None


def one_line(text: str, limit: int = _MAX_ERROR_TAG_CHARS) -> str:
    """`text` on one line (whitespace runs collapsed), cut at `limit` characters."""
    flat = " ".join(text.split())
    return flat if len(flat) <= limit else flat[: limit - 1] + "…"


def record_outcome(
    context: dg.OpExecutionContext,
    outcome: Outcome,
    items_processed: int,
    items_failed: int,
    error: str | None = None,
) -> dict[str, str]:
    """Tag the current run with its outcome and counts; returns the tags written."""
    tags = outcome_tags(outcome, items_processed, items_failed, error)
    context.instance.add_run_tags(context.run_id, tags)
    return tags


def outcome_of(status: dg.DagsterRunStatus, tags: Mapping[str, str]) -> str:
    """The audit outcome of a run: its outcome tag when the run finished, else derived from its status."""
    if status == dg.DagsterRunStatus.SUCCESS:
        return tags.get(TAG_OUTCOME, Outcome.SUCCESS.value)
    if status == dg.DagsterRunStatus.FAILURE:
        return Outcome.FAILED.value
    return status.value.lower()
