"""Audit questions answered straight from Dagster's run storage (any storage: Postgres, SQLite, in-memory).

One function per question, each returning plain dataclasses; `racing audit` only formats them.
"""

from __future__ import annotations

import re
from collections import Counter, defaultdict
from collections.abc import Iterator
from dataclasses import asdict, dataclass, field, is_dataclass
from datetime import UTC, datetime, timedelta

import dagster as dg

from orchestration_core.audit.cleanup import parent_run_id_of
from orchestration_core.dagster_tags import RETRY_NUMBER_TAG
from orchestration_core.run_outcome import (
    TAG_ERROR,
    TAG_ITEMS_FAILED,
    TAG_ITEMS_PROCESSED,
    outcome_of,
)
from orchestration_core.tag_numbers import MAX_ITEM_COUNT, MAX_RETRY_NUMBER, clamped_int

_PAGE_SIZE = 500
_MAX_CHAIN_DEPTH = 50
_WINDOW = re.compile(r"^\s*(\d+)\s*([mhdw])\s*$")
_UNIT_SECONDS = {"m": 60, "h": 3600, "d": 86400, "w": 7 * 86400}


@dataclass(frozen=True)
class RunSummary:
    run_id: str
    job_name: str
    status: str
    outcome: str
    retry_number: int
    parent_run_id: str | None
    items_processed: int | None
    items_failed: int | None
    error: str | None
    created_at: datetime
    duration_seconds: float | None


@dataclass(frozen=True)
class JobOutcomeCounts:
    job_name: str
    counts: dict[str, int]
    total: int


@dataclass
class RetryGroup:
    job_name: str
    retry_number: int
    runs: int = 0
    outcomes: dict[str, int] = field(default_factory=dict)
    run_ids: list[str] = field(default_factory=list)


@dataclass(frozen=True)
class RetryReport:
    groups: list[RetryGroup]
    step_retries_by_job: dict[str, int]


def parse_window(text: str) -> timedelta:
    """'30m', '24h', '7d', '2w' -> timedelta."""
    match = _WINDOW.match(text)
    if not match or int(match.group(1)) == 0:
        raise ValueError(f"invalid window {text!r}: use a positive number with m, h, d or w, e.g. 24h")
    return timedelta(seconds=int(match.group(1)) * _UNIT_SECONDS[match.group(2)])


def _int_tag(tags: dict[str, str], key: str, high: int) -> int | None:
    """A count or number from a run tag, clamped (orchestration_core/tag_numbers.py); None when absent or unreadable."""
    return clamped_int(tags.get(key), 0, high)


def summarize(record: dg.RunRecord, retry_number: int | None = None) -> RunSummary:
    run = record.dagster_run
    tags = dict(run.tags)
    duration = record.end_time - record.start_time if record.start_time and record.end_time else None
    return RunSummary(
        run_id=run.run_id,
        job_name=run.job_name,
        status=run.status.value,
        outcome=outcome_of(run.status, tags),
        retry_number=retry_number if retry_number is not None else (_int_tag(tags, RETRY_NUMBER_TAG, MAX_RETRY_NUMBER) or 0),
        parent_run_id=parent_run_id_of(run),
        items_processed=_int_tag(tags, TAG_ITEMS_PROCESSED, MAX_ITEM_COUNT),
        items_failed=_int_tag(tags, TAG_ITEMS_FAILED, MAX_ITEM_COUNT),
        error=tags.get(TAG_ERROR),
        created_at=_as_utc(record.create_timestamp),
        duration_seconds=round(duration, 3) if duration is not None else None,
    )


def _as_utc(moment: datetime) -> datetime:
    # Storages return aware UTC or naive UTC datetimes.
    return moment.replace(tzinfo=UTC) if moment.tzinfo is None else moment.astimezone(UTC)


class _RetryNumbers:
    """Retry number of a run: the system tag, else the depth of its parent chain (Python re-executions lack the tag)."""

    def __init__(self, instance: dg.DagsterInstance):
        self._instance = instance
        self._memo: dict[str, int] = {}

    def of(self, run: dg.DagsterRun) -> int:
        tagged = _int_tag(dict(run.tags), RETRY_NUMBER_TAG, MAX_RETRY_NUMBER)
        if tagged is not None:
            return tagged
        depth, current = 0, run
        while (parent_id := parent_run_id_of(current)) and depth < _MAX_CHAIN_DEPTH:
            if parent_id in self._memo:
                depth += self._memo[parent_id] + 1
                break
            depth += 1
            parent = self._instance.get_run_by_id(parent_id)
            if parent is None:
                break
            current = parent
        self._memo[run.run_id] = depth
        return depth


def iter_run_records(instance: dg.DagsterInstance, filters: dg.RunsFilter) -> Iterator[dg.RunRecord]:
    """All matching records, newest first, a page at a time (read-only, so any seen run is a valid cursor)."""
    cursor = None
    while records := instance.get_run_records(filters=filters, limit=_PAGE_SIZE, cursor=cursor):
        yield from records
        if len(records) < _PAGE_SIZE:
            return
        cursor = records[-1].dagster_run.run_id


def recent_runs(instance: dg.DagsterInstance, limit: int = 20, job_name: str | None = None) -> list[RunSummary]:
    retries = _RetryNumbers(instance)
    records = instance.get_run_records(filters=dg.RunsFilter(job_name=job_name), limit=limit)
    return [summarize(rec, retries.of(rec.dagster_run)) for rec in records]


def _window_start(since: timedelta, now: datetime | None) -> datetime:
    # Run filters compare naive UTC, so the window start must be UTC.
    return (now or datetime.now(UTC)).astimezone(UTC) - since


def outcome_counts(
    instance: dg.DagsterInstance, since: timedelta, now: datetime | None = None
) -> list[JobOutcomeCounts]:
    """Per job, how many runs created in the window ended in each outcome (or are still in some status)."""
    by_job: dict[str, Counter[str]] = defaultdict(Counter)
    for rec in iter_run_records(instance, dg.RunsFilter(created_after=_window_start(since, now))):
        run = rec.dagster_run
        by_job[run.job_name][outcome_of(run.status, run.tags)] += 1
    return [
        JobOutcomeCounts(job_name=job, counts=dict(sorted(counts.items())), total=sum(counts.values()))
        for job, counts in sorted(by_job.items())
    ]


def retry_chains(instance: dg.DagsterInstance, since: timedelta, now: datetime | None = None) -> RetryReport:
    """Runs in the window that re-execute another run, grouped by job and retry number; plus step retries per job."""
    start = _window_start(since, now)
    retries = _RetryNumbers(instance)
    groups: dict[tuple[str, int], RetryGroup] = {}
    for rec in iter_run_records(instance, dg.RunsFilter(created_after=start)):
        run = rec.dagster_run
        if not parent_run_id_of(run):
            continue
        number = retries.of(run)
        group = groups.setdefault((run.job_name, number), RetryGroup(run.job_name, number))
        group.runs += 1
        outcome = outcome_of(run.status, run.tags)
        group.outcomes[outcome] = group.outcomes.get(outcome, 0) + 1
        group.run_ids.append(run.run_id)
    step_retries: Counter[str] = Counter()
    restarted = dg.EventRecordsFilter(event_type=dg.DagsterEventType.STEP_RESTARTED, after_timestamp=start.timestamp())
    for event in instance.get_event_records(restarted):
        step_retries[event.event_log_entry.job_name or "?"] += 1
    return RetryReport(
        groups=[groups[key] for key in sorted(groups)], step_retries_by_job=dict(sorted(step_retries.items()))
    )


def to_jsonable(value: object) -> object:
    """Dataclasses/datetimes to JSON-ready structures."""
    if is_dataclass(value) and not isinstance(value, type):
        return to_jsonable(asdict(value))
    if isinstance(value, dict):
        return {k: to_jsonable(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [to_jsonable(v) for v in value]
    if isinstance(value, datetime):
        return value.isoformat()
    return value
