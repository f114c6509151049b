"""Maintenance runs that died for an infrastructure reason: re-launched (bounded, new run key) or reported, never lost.

What Dagster 1.13's run retries (the daemon's auto re-execution, dagster.yaml `run_retries`) do for a FAILURE run:
it retries when `dagster/max_retries` (the task's max_retries) is above the number of runs already in the run group,
whatever the failure reason (runs failed by run monitoring's start timeout, runs that never started, dequeue
failures, dead workers; step failures too, since every maintenance run carries retry_on_asset_or_op_failure=true).
It does not retry:
- a task with max_retries 0, even when its run never started (the start timeout, a failed dequeue);
- the retry of a retry past max_retries: a 30 s outage that kills a run and then its retry (at dequeue: "too many
  retries for DB connection") leaves the group exhausted, and nothing else looks at it;
- a run whose retry could not be created (code location unreachable): the daemon marks it will_retry=false for good;
- CANCELED runs (deliberate, or run monitoring's max runtime: the registry's `timeout`).

It can also drop a retry it promised: the run's worker writes the RUN_FAILURE event, then the run's status, then
`dagster/will_retry` (three commits), and the daemon's event consumer, reading in between, sees a failure of a run still
STARTED, decides "no retry" and moves its cursor past the event for good (seen in the production form: two tasks
failed in the same second, one was retried, the other never).

So this guard, a sensor of the maintenance location, looks at each failed maintenance run once Dagster has decided:
- a retry Dagster promised (`will_retry` true) and dropped (its consumer's cursor is past the failure, or 5 minutes
  went by) is made by the guard as Dagster makes it: a re-execution in the run's group, counted against max_retries,
  whatever the failure (the task still existing and enabled);
- a task failure (the op raised `dg.Failure`, i.e. reported it, or run monitoring stopped it at its max runtime) is
  the task's business: max_retries and the failure alert cover it; the guard leaves it alone;
- a death Dagster retries is recorded with the retry's run id (the retry is judged in turn when it fails);
- a death Dagster does not retry, when a later run of the same task (not one of this run's retries or re-launches)
  has succeeded or is under way, is recorded as superseded by it: that run does the task's work, so a re-launch would
  repeat it and an alert would report a loss that did not happen;
- otherwise a death Dagster does not retry is re-launched as a new run (run key `<task>:relaunch:<dead run id>`, tags
  `maintenance/relaunch_of` and `maintenance/relaunch_number`) at most MAX_RELAUNCHES times per chain, when the task
  still exists and is enabled and the run either never reached its op (nothing was done, so repeating is safe) or the
  task allows repeats (max_retries > 0). Otherwise it is reported: an alert through the alert webhook.
Either way the dead run's `racing/error` tag says what happened (GET /executions shows it as `error`) and
`maintenance/guard_verdict` records the decision, so each run is decided once. A verdict is written only once
Dagster's own decision is final (no retry pending), so Dagster's retries never inherit one.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Sequence
from dataclasses import dataclass
from enum import StrEnum

import dagster as dg
import sqlalchemy as sa

from maintenance_jobs.dispatch import job_and_op, run_config_for, run_tags_for
from maintenance_jobs.execution_history.store import amend_error
from maintenance_jobs.execution_history.summary import MAX_RUNTIME_MARKER
from maintenance_jobs.registry import get_task
from maintenance_jobs.tags import (
    TAG_GUARD_VERDICT,
    TAG_GUARD_VERDICT_RUN,
    TAG_RELAUNCH_NUMBER,
    TAG_RELAUNCH_OF,
    TAG_SCHEDULED_MINUTE,
    TAG_TASK,
)
from orchestration_core.audit.alert_webhook import AlertDeliveryError, AlertWebhook
from orchestration_core.audit.alerts import slack_message
from orchestration_core.dagster_tags import AUTO_RETRY_RUN_ID_TAG, PARENT_RUN_ID_TAG, ROOT_RUN_ID_TAG, WILL_RETRY_TAG
from orchestration_core.run_outcome import KIND_MAINTENANCE, TAG_ERROR, TAG_KIND
from orchestration_core.run_retries import retry_consumer_cursor, retry_run_as_the_daemon_would

# Re-launches per chain (the first run, its Dagster retries and re-launches): a longer outage ends in an alert.
MAX_RELAUNCHES = 2
# How long a run Dagster says it will retry may stay without its retry before the guard acts itself.
DAGSTER_RETRY_WAIT = dt.timedelta(minutes=5)
# Failed runs last updated this long ago are no longer looked at (a tick reads only recent failures).
LOOKBACK = dt.timedelta(hours=24)
PAGE_SIZE = 100
MAX_DECISIONS_PER_TICK = 100  # bounds one tick's event reads after a long outage; the rest go next tick

# Dagster's failure-reason tag, read here only (its other tags: orchestration_core/dagster_tags.py)
FAILURE_REASON = "dagster/failure_reason"


class Verdict(StrEnum):
    TASK_FAILURE = "task_failure"  # reported by the op, or stopped at its max runtime: not an infrastructure death
    WAIT = "wait"  # Dagster said it will retry and has not yet
    DAGSTER_RETRIED = "dagster_retried"
    RETRIED = "retried"  # Dagster said it will retry and dropped it: the guard made that retry
    SUPERSEDED = "superseded"  # a later run of the same task succeeded or is under way: it covers the lost one
    RELAUNCH = "relaunched"
    REPORT = "reported"


@dataclass(frozen=True)
class DeadRun:
    """What the decision needs to know about one failed maintenance run."""

    run_id: str
    task_name: str
    tags: dict[str, str]
    ended_at: dt.datetime | None
    op_reported_failure: bool  # a STEP_FAILURE carrying the op's dg.Failure
    hit_max_runtime: bool
    op_started: bool  # a STEP_START event exists: the task may have done part of its work
    # Dagster's retry consumer read past the run's RUN_FAILURE event: a retry it has not made by now never comes
    retry_dropped: bool = False


@dataclass(frozen=True)
class TaskState:
    exists: bool
    enabled: bool = False
    max_retries: int = 0


@dataclass(frozen=True)
class Decision:
    verdict: Verdict
    reason: str = ""


def death_cause(run: DeadRun) -> str:
    reason = run.tags.get(FAILURE_REASON, "UNKNOWN")
    where = "after its op started" if run.op_started else "before its op started"
    return f"died {where} ({reason}), not a failure reported by the task"


def relaunch_number(tags: dict[str, str], unreadable: int) -> int:
    """Re-launches so far in the run's chain; an unreadable tag (edited by hand) counts as `unreadable`."""
    try:
        return int(tags.get(TAG_RELAUNCH_NUMBER) or 0)
    except ValueError:
        return unreadable


def decide(run: DeadRun, task: TaskState, now: dt.datetime, *, newer_run: str | None = None,
           max_relaunches: int = MAX_RELAUNCHES, dagster_retry_wait: dt.timedelta = DAGSTER_RETRY_WAIT) -> Decision:
    """Relaunch, report, or leave to Dagster / the task: see the module docstring."""
    retry_pending = run.tags.get(WILL_RETRY_TAG) == "true" and not run.tags.get(AUTO_RETRY_RUN_ID_TAG)
    waited = run.ended_at is not None and now - run.ended_at >= dagster_retry_wait
    if retry_pending and not (run.retry_dropped or waited):
        return Decision(Verdict.WAIT, "Dagster will retry it")
    if retry_pending and task.exists and task.enabled:
        minutes = dagster_retry_wait.total_seconds() / 60
        why = "its daemon read past the failure" if run.retry_dropped else f"none came within {minutes:g} min"
        return Decision(Verdict.RETRIED, f"Dagster said it would retry it and did not ({why})")
    if run.op_reported_failure or run.hit_max_runtime:
        return Decision(Verdict.TASK_FAILURE, "a failure the task reported (or its max runtime): left to the task")
    if retry := run.tags.get(AUTO_RETRY_RUN_ID_TAG):
        return Decision(Verdict.DAGSTER_RETRIED, f"Dagster retried it as run {retry}")
    # Not retried by Dagster; or it said it would, but no retry came (its daemon down or failing): the guard acts.
    if newer_run:
        return Decision(Verdict.SUPERSEDED, f"not re-launched: a later run of the task, {newer_run}, covers it")
    relaunches = relaunch_number(run.tags, unreadable=max_relaunches)
    if relaunches >= max_relaunches:
        return Decision(Verdict.REPORT, f"not re-launched: already re-launched {relaunches} times")
    if not task.exists:
        return Decision(Verdict.REPORT, f"not re-launched: task {run.task_name!r} is no longer in the registry")
    if not task.enabled:
        return Decision(Verdict.REPORT, f"not re-launched: task {run.task_name!r} is disabled")
    if run.op_started and task.max_retries == 0:
        return Decision(Verdict.REPORT, "not re-launched: its op had started and the task's max_retries is 0")
    return Decision(Verdict.RELAUNCH, f"re-launch {relaunches + 1} of {max_relaunches}")


def relaunch_run_key(task_name: str, dead_run_id: str) -> str:
    return f"{task_name}:relaunch:{dead_run_id}"


def relaunch_request(task, dead: DeadRun) -> dg.RunRequest:
    """A new run of `task` (its current config) for the dead run; its key is stable, so it launches at most once."""
    job, _ = job_and_op(task.executor)
    tags = run_tags_for(task, "retry") | {
        TAG_RELAUNCH_OF: dead.run_id,
        TAG_RELAUNCH_NUMBER: str(relaunch_number(dead.tags, unreadable=MAX_RELAUNCHES) + 1),
    }
    if minute := dead.tags.get(TAG_SCHEDULED_MINUTE):
        tags[TAG_SCHEDULED_MINUTE] = minute
    return dg.RunRequest(run_key=relaunch_run_key(task.task_name, dead.run_id), job_name=job.name,
                         run_config=run_config_for(task), tags=tags)


def lost_run_message(dead: DeadRun, reason: str) -> dict:
    lines = [f"task `{dead.task_name}`, run `{dead.run_id}`", death_cause(dead), reason]
    return slack_message(f"Maintenance run lost: {dead.task_name}", lines)


def _dead_run(instance: dg.DagsterInstance, record: dg.RunRecord, retry_cursor: int | None) -> DeadRun:
    run = record.dagster_run
    failures = instance.get_records_for_run(run.run_id, of_type=dg.DagsterEventType.STEP_FAILURE).records
    reported = any(
        r.event_log_entry.dagster_event and r.event_log_entry.dagster_event.step_failure_data.user_failure_data
        for r in failures
    )
    canceling = instance.get_records_for_run(run.run_id, of_type=dg.DagsterEventType.RUN_CANCELING).records
    hit_max_runtime = any(
        MAX_RUNTIME_MARKER in (r.event_log_entry.dagster_event.message or "")
        for r in canceling if r.event_log_entry.dagster_event
    )
    started = instance.get_records_for_run(run.run_id, of_type=dg.DagsterEventType.STEP_START, limit=1).records
    ended = dt.datetime.fromtimestamp(record.end_time, dt.UTC) if record.end_time else None
    dropped = False
    if retry_cursor is not None and run.tags.get(WILL_RETRY_TAG) == "true" and not run.tags.get(AUTO_RETRY_RUN_ID_TAG):
        # Only a promised retry not made yet can have been dropped: the event read is skipped for every other run.
        failed_at = instance.get_records_for_run(run.run_id, of_type=dg.DagsterEventType.RUN_FAILURE).records
        dropped = bool(failed_at) and retry_cursor >= failed_at[-1].storage_id
    return DeadRun(run.run_id, run.tags.get(TAG_TASK, ""), dict(run.tags), ended, reported, hit_max_runtime,
                   bool(started), dropped)


def _task_state(engine: sa.Engine, task_name: str) -> TaskState:
    task = get_task(engine, task_name) if task_name else None
    return TaskState(True, task.enabled, task.max_retries) if task else TaskState(False)


@dataclass(frozen=True)
class GuardTick:
    requests: list[dg.RunRequest]
    notes: list[str]  # one line per decided run (the tick's log / skip reason)


def guard_tick(instance: dg.DagsterInstance, engine: sa.Engine, alert_webhook: AlertWebhook,
               now: dt.datetime) -> GuardTick:
    """Decide every undecided failed maintenance run of the last LOOKBACK; tag each decision on the run."""
    requests: list[dg.RunRequest] = []
    notes: list[str] = []
    # Read before the runs: the consumer moves its cursor only after it has retried and tagged what it read, so a
    # failure at or below it whose run (read after) has no retry tag was dropped, not retried a moment ago.
    retry_cursor = retry_consumer_cursor(instance)
    undecided = [r for r in _recent_failures(instance, now) if r.dagster_run.tags.get(TAG_GUARD_VERDICT_RUN)
                 != r.dagster_run.run_id]
    for record in undecided[-MAX_DECISIONS_PER_TICK:][::-1]:  # oldest first
        dead = _dead_run(instance, record, retry_cursor)
        decision = decide(dead, _task_state(engine, dead.task_name), now, newer_run=_newer_run(instance, record))
        if decision.verdict == Verdict.WAIT:
            continue
        if decision.verdict == Verdict.RETRIED:
            retry = retry_run_as_the_daemon_would(instance, record.dagster_run)
            note = f"{dead.run_id} ({dead.task_name}): {decision.reason}; retried as run {retry.run_id}"
            # A task's own failure keeps its error (the op's message); a death says what happened, as below.
            task_failure = dead.op_reported_failure or dead.hit_max_runtime
            _record(instance, engine, dead, Verdict.RETRIED, None if task_failure else f"{death_cause(dead)}; {note}")
            notes.append(note)
            continue
        note = f"{dead.run_id} ({dead.task_name}): {death_cause(dead)}; {decision.reason}"
        if decision.verdict == Verdict.TASK_FAILURE:
            _record(instance, engine, dead, decision.verdict, None)  # its own error tag stays
            continue
        if decision.verdict in (Verdict.DAGSTER_RETRIED, Verdict.SUPERSEDED):
            _record(instance, engine, dead, decision.verdict, note)
        elif (relaunched := _relaunched_as(instance, dead)) is not None:
            note = f"{dead.run_id} ({dead.task_name}): {death_cause(dead)}; re-launched as run {relaunched}"
            _record(instance, engine, dead, Verdict.RELAUNCH, note)
        elif decision.verdict == Verdict.RELAUNCH:
            # Recorded as relaunched only once the new run exists (above, on a later tick); until then the request
            # is repeated under its stable key, so a request lost before launch is made again, never twice.
            requests.append(relaunch_request(get_task(engine, dead.task_name), dead))
            note += f", requested as {relaunch_run_key(dead.task_name, dead.run_id)}"
            _note(instance, engine, dead.run_id, note)
        else:
            try:
                delivered = _report(alert_webhook, dead, decision.reason)
            except AlertDeliveryError as exc:  # stays undecided: the alert is tried again next tick
                _note(instance, engine, dead.run_id, note)
                notes.append(f"{note} (alert not delivered, tried again next tick: {exc})")
                continue
            if not delivered:
                note += " (alerts disabled: ALERT_WEBHOOK_URL is not set)"
            _record(instance, engine, dead, decision.verdict, note)
        notes.append(note)
    return GuardTick(requests, notes)


def _recent_failures(instance: dg.DagsterInstance, now: dt.datetime) -> list[dg.RunRecord]:
    """Failed maintenance runs updated within LOOKBACK, newest first, a page at a time (read-only paging)."""
    filters = dg.RunsFilter(tags={TAG_KIND: KIND_MAINTENANCE}, statuses=[dg.DagsterRunStatus.FAILURE],
                            updated_after=(now - LOOKBACK).astimezone(dt.UTC).replace(tzinfo=None))
    found: list[dg.RunRecord] = []
    cursor = None
    while page := instance.get_run_records(filters=filters, limit=PAGE_SIZE, cursor=cursor):
        found += page
        if len(page) < PAGE_SIZE:
            break
        cursor = page[-1].dagster_run.run_id
    return found


# A later run in one of these states does (or did) the task's work; a failed or canceled one is judged on its own.
_COVERING_STATUSES = [dg.DagsterRunStatus.SUCCESS, dg.DagsterRunStatus.QUEUED, dg.DagsterRunStatus.NOT_STARTED,
                      dg.DagsterRunStatus.STARTING, dg.DagsterRunStatus.STARTED]
_CHAIN_TAGS = (TAG_RELAUNCH_OF, PARENT_RUN_ID_TAG, ROOT_RUN_ID_TAG)


def _newer_run(instance: dg.DagsterInstance, dead: dg.RunRecord) -> str | None:
    """A run of the same task created after `dead` that succeeded or is under way, other than `dead`'s own retries
    and re-launches (those are its chain, followed by the verdicts above)."""
    task_name = dead.dagster_run.tags.get(TAG_TASK)
    if not task_name:
        return None
    filters = dg.RunsFilter(tags={TAG_TASK: task_name}, statuses=_COVERING_STATUSES,
                            created_after=dead.create_timestamp.astimezone(dt.UTC).replace(tzinfo=None))
    for record in instance.get_run_records(filters=filters, limit=PAGE_SIZE):
        run = record.dagster_run
        if run.run_id != dead.dagster_run.run_id and all(run.tags.get(t) != dead.dagster_run.run_id
                                                          for t in _CHAIN_TAGS):
            return run.run_id
    return None


def _relaunched_as(instance: dg.DagsterInstance, dead: DeadRun) -> str | None:
    """The id of the run re-launched for `dead` (the first; its own Dagster retries carry the same tag)."""
    records = instance.get_run_records(filters=dg.RunsFilter(tags={TAG_RELAUNCH_OF: dead.run_id}), limit=1,
                                       ascending=True)
    return records[0].dagster_run.run_id if records else None


def _report(alert_webhook: AlertWebhook, dead: DeadRun, reason: str) -> bool:
    """Post the loss; False when alerts are disabled. A failed delivery raises, so the run stays undecided."""
    if not alert_webhook.enabled:
        return False
    alert_webhook.post(lost_run_message(dead, reason))
    return True


def _note(instance: dg.DagsterInstance, engine: sa.Engine, run_id: str, note: str) -> None:
    """What happened to the run, on the run (racing/error) and in its execution history row, when recorded."""
    instance.add_run_tags(run_id, {TAG_ERROR: note[:500]})
    amend_error(engine, run_id, note[:500])


def _record(instance: dg.DagsterInstance, engine: sa.Engine, dead: DeadRun, verdict: Verdict,
            note: str | None) -> None:
    tags = {TAG_GUARD_VERDICT: verdict.value, TAG_GUARD_VERDICT_RUN: dead.run_id}
    if note:
        _note(instance, engine, dead.run_id, note)
    instance.add_run_tags(dead.run_id, tags)


def tick_summary(notes: Sequence[str]) -> str:
    return "; ".join(notes) if notes else "no maintenance run died for an infrastructure reason undecided"

