"""Run retention: delete old successful runs (rows, events, compute-log files); keep all that documents a problem,
the latest successful run of every job and of every maintenance task whatever its age (the last-success metric and
the overdue alerts read it: a monthly job's only success must outlive the 14 days), and every maintenance run whose
summary is not yet in the execution history (it would be lost: the history is what outlives retention).

What documents a problem (failed, canceled and partial runs, and the successes that recovered them) is kept forever
unless RUN_RETENTION_FAILED_DAYS is set: then such runs older than that go too, never sooner than the successes. A
recovery goes with the failed run it recovers (while that run is kept, so is its recovery); the latest success of each
job and task and every run missing from the execution history still stay. After a cleanup that deleted rows, the tables
it emptied are vacuumed (bulk_delete.vacuum_after_delete), so the space is reused at once and the dead rows a night
leaves behind never wait for autovacuum's 20% threshold.

Paging is ascending by storage id with the cursor only ever set to a run that was *kept*: a deleted run as cursor makes
the next page empty (its id can no longer be looked up). Each page is decided, deleted and dropped, so memory stays flat.
"""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import asdict, dataclass, field
from datetime import UTC, date, datetime, timedelta
from enum import StrEnum

import dagster as dg

from orchestration_core.audit.bulk_delete import RunDeleter, run_deleter_for, vacuum_after_delete
from orchestration_core.audit.execution_history import TAG_HISTORY_RECORDED
from orchestration_core.dagster_tags import PARENT_RUN_ID_TAG
from orchestration_core.run_outcome import KIND_MAINTENANCE, TAG_KIND, TAG_MAINTENANCE_TASK, Outcome, outcome_of
from orchestration_core.settings import SUCCESS_RETENTION_DAYS

DEFAULT_OLDER_THAN_DAYS = SUCCESS_RETENTION_DAYS
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


# Kept because they document a problem: what RUN_RETENTION_FAILED_DAYS lets go once older than it.
PROBLEM_REASONS = frozenset({KeepReason.FAILED, KeepReason.CANCELED, KeepReason.PARTIAL, KeepReason.FAILED_OUTCOME})


@dataclass
class CleanupReport:
    cutoff: datetime
    dry_run: bool
    deleted: int = 0
    would_delete: int = 0  # dry run only: what a real run would have deleted
    problem_cutoff: datetime | None = None  # RUN_RETENTION_FAILED_DAYS' cutoff; None: problems are kept forever
    deleted_problems: int = 0  # of `deleted`: failed, canceled and partial runs past problem_cutoff
    vacuum_seconds: float | None = None  # None: nothing deleted, or not Postgres
    kept: dict[str, int] = field(default_factory=dict)
    batches: int = 0
    duration_seconds: float = 0.0

    def as_metadata(self) -> dict[str, object]:
        data = asdict(self)
        data["cutoff"] = self.cutoff.isoformat()
        data["problem_cutoff"] = self.problem_cutoff.isoformat() if self.problem_cutoff else None
        data["duration_seconds"] = round(self.duration_seconds, 3)
        data["kept_total"] = sum(self.kept.values())
        return data


def reindex_due(day: date, every_days: int) -> bool:
    """Whether the nightly cleanup of `day` (the racing day it runs on) rebuilds the indexes: every `every_days`
    days, counted from the calendar so no state is kept; 0 never."""
    if every_days < 0:
        raise ValueError(f"reindex_every_days must be 0 (never) or more, got {every_days}")
    return every_days > 0 and day.toordinal() % every_days == 0


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


def failed_retention_cutoff(older_than_days: int, failed_older_than_days: int | None,
                            now: datetime | None = None) -> datetime | None:
    """The creation time before which failed, canceled and partial runs go; None keeps them forever. Refused when
    shorter than the success retention: the audit trail must outlive the successes."""
    if failed_older_than_days is None:
        return None
    if failed_older_than_days < older_than_days:
        raise ValueError(f"failed runs' retention ({failed_older_than_days} days) is shorter than the successes' "
                         f"({older_than_days} days): failed runs are the audit trail and must outlive the successes")
    return cleanup_cutoff(failed_older_than_days, now)


def _utc(moment: datetime) -> datetime:
    return moment.replace(tzinfo=UTC) if moment.tzinfo is None else moment.astimezone(UTC)


def keep_reason(
    run_status: dg.DagsterRunStatus,
    tags: Mapping[str, str],
    parent_kept: bool,
    *,
    created_at: datetime | None = None,
    problem_cutoff: datetime | None = None,
) -> KeepReason | None:
    """Why an old run is kept, or None when it may be deleted. `parent_kept`: it re-executes a run that is kept.
    A run kept for documenting a problem is no longer kept once created before `problem_cutoff` (when given)."""
    reason = _keep_reason(run_status, tags, parent_kept)
    if (reason in PROBLEM_REASONS and problem_cutoff is not None and created_at is not None
            and _utc(created_at) < problem_cutoff):
        return None
    return reason


def _keep_reason(run_status: dg.DagsterRunStatus, tags: Mapping[str, str], parent_kept: bool) -> KeepReason | None:
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


def _parent_is_kept(parent: dg.RunRecord | None, problem_cutoff: datetime | None) -> bool:
    """A parent documents a problem when it is itself kept for its status or outcome (not merely for its own parent),
    and is not yet past the failed runs' retention (a recovery goes with the run it recovers)."""
    if parent is None:
        return False
    run = parent.dagster_run
    return keep_reason(run.status, run.tags, parent_kept=False, created_at=parent.create_timestamp,
                       problem_cutoff=problem_cutoff) is not None


def _parents_by_id(instance: dg.DagsterInstance, runs: Iterable[dg.DagsterRun]) -> dict[str, dg.RunRecord]:
    parent_ids = sorted({pid for run in runs if (pid := parent_run_id_of(run))})
    if not parent_ids:
        return {}
    records = instance.get_run_records(filters=dg.RunsFilter(run_ids=parent_ids))
    return {rec.dagster_run.run_id: rec for rec in records}


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


def _count_other_kept(instance: dg.DagsterInstance, cutoff: datetime, problem_cutoff: datetime | None) -> dict[str, int]:
    """Runs the pruning never looks at, counted with one query per reason (cheap, index-backed)."""
    old = {"created_before": cutoff}
    # Failed and canceled runs older than problem_cutoff are looked at (and counted) by the second pass.
    unexpired = {**old, **({"created_after": problem_cutoff} if problem_cutoff else {})}
    counts = {
        KeepReason.FAILED: instance.get_runs_count(dg.RunsFilter(statuses=[dg.DagsterRunStatus.FAILURE], **unexpired)),
        KeepReason.CANCELED: instance.get_runs_count(
            dg.RunsFilter(statuses=[dg.DagsterRunStatus.CANCELED], **unexpired)),
        KeepReason.IN_PROGRESS: instance.get_runs_count(dg.RunsFilter(statuses=_IN_PROGRESS_STATUSES, **old)),
        KeepReason.NEWER_THAN_CUTOFF: instance.get_runs_count(dg.RunsFilter(created_after=cutoff)),
    }
    return {reason.value: n for reason, n in counts.items()}


def prune_successful_runs(
    instance: dg.DagsterInstance,
    older_than_days: int = DEFAULT_OLDER_THAN_DAYS,
    *,
    failed_older_than_days: int | None = None,
    dry_run: bool = False,
    batch_size: int = DEFAULT_BATCH_SIZE,
    now: datetime | None = None,
    deleter: RunDeleter | None = None,
    vacuum: bool = True,
    log: dg.DagsterLogManager | None = None,
) -> CleanupReport:
    """Delete SUCCESS runs created before the cutoff unless `keep_reason` says otherwise or the run is the latest
    success of its job or maintenance task; with `failed_older_than_days`, also the failed, canceled and partial runs
    (and their recoveries) created before that many days ago. Then, when rows went and `vacuum`, VACUUM (ANALYZE) the
    tables they went from. Return what happened."""
    if batch_size < 1:
        raise ValueError(f"batch_size must be at least 1, got {batch_size}")
    started = time.perf_counter()
    cutoff = cleanup_cutoff(older_than_days, now)
    problem_cutoff = failed_retention_cutoff(older_than_days, failed_older_than_days, now)
    report = CleanupReport(cutoff=cutoff, dry_run=dry_run, problem_cutoff=problem_cutoff)
    kept: Counter[str] = Counter(_count_other_kept(instance, cutoff, problem_cutoff))
    deleter = deleter or run_deleter_for(instance)
    latest = LatestSuccesses(instance)
    # Only SUCCESS runs are candidates; the storage compares naive UTC, so the cutoff is passed in UTC.
    passes = [dg.RunsFilter(statuses=[dg.DagsterRunStatus.SUCCESS], created_before=cutoff)]
    if problem_cutoff is not None:
        passes.append(dg.RunsFilter(statuses=[dg.DagsterRunStatus.FAILURE, dg.DagsterRunStatus.CANCELED],
                                    created_before=problem_cutoff))
    for candidates in passes:
        _prune_pass(instance, candidates, report, kept, deleter, latest, problem_cutoff, batch_size, dry_run, log)
    if vacuum and report.deleted:
        report.vacuum_seconds = vacuum_after_delete(instance)
    report.kept = {reason: n for reason, n in sorted(kept.items()) if n}
    report.duration_seconds = time.perf_counter() - started
    return report


def _prune_pass(
    instance: dg.DagsterInstance,
    candidates: dg.RunsFilter,
    report: CleanupReport,
    kept: Counter[str],
    deleter: RunDeleter,
    latest: LatestSuccesses,
    problem_cutoff: datetime | None,
    batch_size: int,
    dry_run: bool,
    log: dg.DagsterLogManager | None,
) -> None:
    cursor: str | None = None  # always a run that still exists after this page
    while True:
        records = instance.get_run_records(filters=candidates, limit=batch_size, cursor=cursor, ascending=True)
        if not records:
            break
        report.batches += 1
        parents = _parents_by_id(instance, [rec.dagster_run for rec in records])
        doomed: list[str] = []
        problems = 0
        for record in records:
            run = record.dagster_run
            parent_id = parent_run_id_of(run)
            parent_kept = _parent_is_kept(parents.get(parent_id) if parent_id else None, problem_cutoff)
            reason = keep_reason(run.status, run.tags, parent_kept, created_at=record.create_timestamp,
                                 problem_cutoff=problem_cutoff)
            if reason is None and history_unrecorded(run):
                reason = KeepReason.HISTORY_UNRECORDED
            if reason is None and run.status == dg.DagsterRunStatus.SUCCESS and latest.is_latest(run):
                reason = KeepReason.LATEST_SUCCESS
            if reason is not None:
                kept[reason.value] += 1
                cursor = run.run_id
            elif dry_run:
                report.would_delete += 1
                cursor = run.run_id  # not deleted, so a valid cursor
            else:
                doomed.append(run.run_id)
                problems += _keep_reason(run.status, run.tags, parent_kept=False) in PROBLEM_REASONS
        if doomed:
            deleter.delete(doomed)
            report.deleted += len(doomed)
            report.deleted_problems += problems
        if log:
            log.info(f"cleanup batch {report.batches}: {len(doomed)} deleted, cursor {cursor}")
        if len(records) < batch_size:
            break
