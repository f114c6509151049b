"""Run retention: delete old successful runs (rows, events, compute-log files); keep all that documents a problem,
the latest successful run of every job and of every maintenance task whatever its age (the last-success metric and
the overdue alerts read it: a monthly job's only success must outlive the 14 days), and every maintenance run whose
summary is not yet in the execution history (it would be lost: the history is what outlives retention).

Paging is ascending by storage id with the cursor only ever set to a run that was *kept*: a deleted run as cursor makes
the next page empty (its id can no longer be looked up). Each page is decided, deleted and dropped, so memory stays flat.
"""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime, timedelta
from enum import StrEnum

import dagster as dg

from orchestration_core.audit.bulk_delete import RunDeleter, run_deleter_for
from orchestration_core.audit.execution_history import TAG_HISTORY_RECORDED
from orchestration_core.dagster_tags import PARENT_RUN_ID_TAG
from orchestration_core.run_outcome import KIND_MAINTENANCE, TAG_KIND, TAG_MAINTENANCE_TASK, Outcome, outcome_of

DEFAULT_OLDER_THAN_DAYS = 14
DEFAULT_BATCH_SIZE = 500
# Tags whose every value keeps its latest SUCCESS run (besides every job name): one maintenance job runs many tasks.
KEEP_LATEST_SUCCESS_PER_TAG = (TAG_MAINTENANCE_TASK,)
_IN_PROGRESS_STATUSES = [
    dg.DagsterRunStatus.QUEUED,
    dg.DagsterRunStatus.NOT_STARTED,
    dg.DagsterRunStatus.STARTING,
    dg.DagsterRunStatus.STARTED,
    dg.DagsterRunStatus.CANCELING,
]


class KeepReason(StrEnum):
    """Why a run old enough to prune is kept."""

    PARTIAL = "partial"  # SUCCESS status, but some items failed for good
    FAILED_OUTCOME = "failed_outcome"  # SUCCESS status, tagged failed: nothing was processed
    RECOVERS_KEPT_RUN = "recovers_kept_run"  # successful re-execution of a kept failed/canceled/partial run
    LATEST_SUCCESS = "latest_success"  # the newest SUCCESS run of its job or of its maintenance task
    HISTORY_UNRECORDED = "history_unrecorded"  # a maintenance run whose summary is not in the execution history yet
    FAILED = "failed"
    CANCELED = "canceled"
    IN_PROGRESS = "in_progress"  # queued, starting, started, canceling
    NEWER_THAN_CUTOFF = "newer_than_cutoff"


@dataclass
class CleanupReport:
    cutoff: datetime
    dry_run: bool
    deleted: int = 0
    would_delete: int = 0  # dry run only: what a real run would have deleted
    kept: dict[str, int] = field(default_factory=dict)
    batches: int = 0
    duration_seconds: float = 0.0

    def as_metadata(self) -> dict[str, object]:
        data = asdict(self)
        data["cutoff"] = self.cutoff.isoformat()
        data["duration_seconds"] = round(self.duration_seconds, 3)
        data["kept_total"] = sum(self.kept.values())
        return data


def cleanup_cutoff(older_than_days: int, now: datetime | None = None) -> datetime:
    """The UTC creation time before which successful runs are pruned (run filters compare naive UTC)."""
    if older_than_days < 1:
        raise ValueError(f"older_than_days must be at least 1, got {older_than_days}")
    now = now or datetime.now(UTC)
    if now.tzinfo is None:
        raise ValueError("now must be timezone-aware")
    return now.astimezone(UTC) - timedelta(days=older_than_days)


def parent_run_id_of(run: dg.DagsterRun) -> str | None:
    """The run this one re-executes: the field (set by every re-execution path) or the tag (daemon and UI)."""
    return run.parent_run_id or run.tags.get(PARENT_RUN_ID_TAG)


def keep_reason(run_status: dg.DagsterRunStatus, tags: Mapping[str, str], parent_kept: bool) -> KeepReason | None:
    """Why an old run is kept, or None when it may be deleted. `parent_kept`: it re-executes a run that is kept."""
    if run_status == dg.DagsterRunStatus.FAILURE:
        return KeepReason.FAILED
    if run_status == dg.DagsterRunStatus.CANCELED:
        return KeepReason.CANCELED
    if run_status != dg.DagsterRunStatus.SUCCESS:
        return KeepReason.IN_PROGRESS
    outcome = outcome_of(run_status, tags)
    if outcome == Outcome.PARTIAL:
        return KeepReason.PARTIAL
    if outcome == Outcome.FAILED:
        return KeepReason.FAILED_OUTCOME
    if parent_kept:
        return KeepReason.RECOVERS_KEPT_RUN
    return None


def history_unrecorded(run: dg.DagsterRun) -> bool:
    """A maintenance run not (yet) recorded in the execution history: its own id is not in its recorded tag (a retry
    copies its parent's tags, so a copied value names the parent)."""
    return run.tags.get(TAG_KIND) == KIND_MAINTENANCE and run.tags.get(TAG_HISTORY_RECORDED) != run.run_id


def _parent_is_kept(parent: dg.DagsterRun | None) -> bool:
    """A parent documents a problem when it is itself kept for its status or outcome (not merely for its own parent)."""
    if parent is None:
        return False
    return keep_reason(parent.status, parent.tags, parent_kept=False) is not None


def _parents_by_id(instance: dg.DagsterInstance, runs: Iterable[dg.DagsterRun]) -> dict[str, dg.DagsterRun]:
    parent_ids = sorted({pid for run in runs if (pid := parent_run_id_of(run))})
    if not parent_ids:
        return {}
    records = instance.get_run_records(filters=dg.RunsFilter(run_ids=parent_ids))
    return {rec.dagster_run.run_id: rec.dagster_run for rec in records}


class LatestSuccesses:
    """Whether a run is the newest SUCCESS run (by creation) of its job name or of its value of a kept tag.

    One indexed `limit=1` query per distinct job name and tag value met among the candidates, remembered for the whole
    cleanup: a few dozen queries however many runs are pruned. A run newer than the cutoff that is the latest makes
    every old run of that name deletable; a name whose latest success is old keeps exactly that one run.
    """

    def __init__(self, instance: dg.DagsterInstance, tag_keys: Iterable[str] = KEEP_LATEST_SUCCESS_PER_TAG):
        self._instance = instance
        self._tag_keys = tuple(tag_keys)
        self._latest: dict[tuple[str, str], str | None] = {}

    def _latest_id(self, key: tuple[str, str]) -> str | None:
        if key not in self._latest:
            kind, value = key
            where = {"job_name": value} if kind == "" else {"tags": {kind: value}}
            records = self._instance.get_run_records(
                filters=dg.RunsFilter(statuses=[dg.DagsterRunStatus.SUCCESS], **where), limit=1
            )
            self._latest[key] = records[0].dagster_run.run_id if records else None
        return self._latest[key]

    def is_latest(self, run: dg.DagsterRun) -> bool:
        keys = [("", run.job_name)] + [(tag, run.tags[tag]) for tag in self._tag_keys if run.tags.get(tag)]
        return any(self._latest_id(key) == run.run_id for key in keys)


def _count_other_kept(instance: dg.DagsterInstance, cutoff: datetime) -> dict[str, int]:
    """Runs the pruning never looks at, counted with one query per reason (cheap, index-backed)."""
    old = {"created_before": cutoff}
    counts = {
        KeepReason.FAILED: instance.get_runs_count(dg.RunsFilter(statuses=[dg.DagsterRunStatus.FAILURE], **old)),
        KeepReason.CANCELED: instance.get_runs_count(dg.RunsFilter(statuses=[dg.DagsterRunStatus.CANCELED], **old)),
        KeepReason.IN_PROGRESS: instance.get_runs_count(dg.RunsFilter(statuses=_IN_PROGRESS_STATUSES, **old)),
        KeepReason.NEWER_THAN_CUTOFF: instance.get_runs_count(dg.RunsFilter(created_after=cutoff)),
    }
    return {reason.value: n for reason, n in counts.items()}


def prune_successful_runs(
    instance: dg.DagsterInstance,
    older_than_days: int = DEFAULT_OLDER_THAN_DAYS,
    *,
    dry_run: bool = False,
    batch_size: int = DEFAULT_BATCH_SIZE,
    now: datetime | None = None,
    deleter: RunDeleter | None = None,
    log: dg.DagsterLogManager | None = None,
) -> CleanupReport:
    """Delete SUCCESS runs created before the cutoff unless `keep_reason` says otherwise or the run is the latest
    success of its job or maintenance task; return what happened."""
    if batch_size < 1:
        raise ValueError(f"batch_size must be at least 1, got {batch_size}")
    started = time.perf_counter()
    cutoff = cleanup_cutoff(older_than_days, now)
    report = CleanupReport(cutoff=cutoff, dry_run=dry_run)
    kept: Counter[str] = Counter(_count_other_kept(instance, cutoff))
    deleter = deleter or run_deleter_for(instance)
    latest = LatestSuccesses(instance)
    # Only SUCCESS runs are candidates; the storage compares naive UTC, so the cutoff is passed in UTC.
    candidates = dg.RunsFilter(statuses=[dg.DagsterRunStatus.SUCCESS], created_before=cutoff)
    cursor: str | None = None  # always a run that still exists after this page
    while True:
        records = instance.get_run_records(filters=candidates, limit=batch_size, cursor=cursor, ascending=True)
        if not records:
            break
        report.batches += 1
        runs = [rec.dagster_run for rec in records]
        parents = _parents_by_id(instance, runs)
        doomed: list[str] = []
        for run in runs:
            parent_id = parent_run_id_of(run)
            reason = keep_reason(run.status, run.tags, _parent_is_kept(parents.get(parent_id) if parent_id else None))
            if reason is None and history_unrecorded(run):
                reason = KeepReason.HISTORY_UNRECORDED
            if reason is None and latest.is_latest(run):
                reason = KeepReason.LATEST_SUCCESS
            if reason is not None:
                kept[reason.value] += 1
                cursor = run.run_id
            elif dry_run:
                report.would_delete += 1
                cursor = run.run_id  # not deleted, so a valid cursor
            else:
                doomed.append(run.run_id)
        if doomed:
            deleter.delete(doomed)
            report.deleted += len(doomed)
        if log:
            log.info(f"cleanup batch {report.batches}: {len(doomed)} deleted, cursor {cursor}")
        if len(records) < batch_size:
            break
    report.kept = {reason: n for reason, n in sorted(kept.items()) if n}
    report.duration_seconds = time.perf_counter() - started
    return report
