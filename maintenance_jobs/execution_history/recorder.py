"""Writing the history: each ended maintenance run once, by the run status sensors, and by a backfill pass for any
run they missed.

Why a backfill: a run status sensor processes each run end once. If writing fails (the registry is down, the code
server restarts between the run's end and the write), Dagster logs the error and moves its cursor on; and a sensor
that starts for the first time (a new install, an upgrade) begins at the newest event. So `backfill_history`, run
every minute by the `maintenance_history_backfill` sensor, records every ended maintenance run whose summary is not
marked on the run, oldest first, a bounded batch per tick, and then moves the registry's recorded-through mark (which
keeps the next passes, and every /executions page, to the runs that ended since).

A run's summary goes in one transaction with its task row's last status; the run is then tagged
`maintenance/history_recorded=<run id>`, which is what retention checks before deleting it. A crash between the two
leaves the tag missing, so the run is kept and recorded again (the insert is keyed by run id: nothing changes).
"""

from __future__ import annotations

import datetime as dt
import logging
import time
from dataclasses import dataclass, field

import dagster as dg
import sqlalchemy as sa

from maintenance_jobs.execution_history import store
from maintenance_jobs.execution_history.run_storage import unrecorded_ended_runs
from maintenance_jobs.execution_history.summary import summarize
from maintenance_jobs.tags import TAG_STATUS
from orchestration_core.audit.execution_history import TAG_HISTORY_RECORDED
from orchestration_core.run_outcome import TAG_ERROR, TAG_OUTCOME, Outcome, one_line, outcome_tags

log = logging.getLogger(__name__)

# A run's end is written with its writer's clock before its transaction commits: the mark stays this far behind the
# pass that sets it, so a run that ended just before the pass but committed after it is still looked at next time.
RECORDED_THROUGH_MARGIN = dt.timedelta(minutes=5)
BACKFILL_BATCH = 200
BACKFILL_SECONDS = 30.0  # well inside the sensor's 60 s evaluation timeout


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


def record_run(instance: dg.DagsterInstance, record: dg.RunRecord, engine: sa.Engine) -> str:
    """Record one ended run (idempotent); returns its history status."""
    record = explain_unexplained_failure(instance, record)
    summary = summarize(instance, record)
    store.write_summary(engine, summary)
    try:
        instance.add_run_tags(record.dagster_run.run_id,
                              {TAG_STATUS: summary.status, TAG_HISTORY_RECORDED: record.dagster_run.run_id})
    except dg.DagsterRunNotFoundError:  # deleted meanwhile: its summary is recorded, nothing left to mark
        pass
    return summary.status


def explain_unexplained_failure(instance: dg.DagsterInstance, record: dg.RunRecord) -> dg.RunRecord:
    """A run refused or lost before its op could record an outcome (a launch refused, a worker gone) is tagged
    failed with the reason from its own events, so the run, the audit and the history all say why. A reason already
    on the run (the run guard's verdict) is kept."""
    run = record.dagster_run
    if run.status != dg.DagsterRunStatus.FAILURE or TAG_OUTCOME in run.tags or TAG_ERROR in run.tags:
        return record
    reason = failure_reason(instance, run.run_id) or "the run failed before its op recorded an outcome"
    try:
        instance.add_run_tags(run.run_id, outcome_tags(Outcome.FAILED, 0, 1, reason))
    except dg.DagsterRunNotFoundError:
        return record
    return instance.get_run_record_by_id(run.run_id) or record


@dataclass
class BackfillReport:
    recorded: list[str] = field(default_factory=list)
    failed: dict[str, str] = field(default_factory=dict)  # run id -> why it could not be recorded (tried again)
    caught_up: bool = False  # every ended run is recorded: the mark moved to now less the margin
    recorded_through: dt.datetime | None = None

    def summary(self) -> str:
        text = f"recorded {len(self.recorded)} ended runs the status sensors had not"
        if self.failed:
            text += f"; {len(self.failed)} could not be recorded (tried again next tick): " + "; ".join(
                f"{run_id}: {error}" for run_id, error in list(self.failed.items())[:5])
        mark = self.recorded_through.isoformat() if self.recorded_through else "not set"
        return f"{text}; {'caught up' if self.caught_up else 'more to do'}, recorded through {mark}"


def backfill_history(instance: dg.DagsterInstance, engine: sa.Engine, now: dt.datetime, *,
                     batch: int = BACKFILL_BATCH, seconds: float = BACKFILL_SECONDS) -> BackfillReport:
    """Record ended maintenance runs whose summary is not marked recorded, oldest first; then advance the mark."""
    report = BackfillReport()
    with engine.connect() as conn:
        mark = store.recorded_through(conn)
    candidates = unrecorded_ended_runs(instance.run_storage, mark, batch + 1)
    deadline = time.monotonic() + seconds
    first_left: dt.datetime | None = None  # the oldest update among runs still unrecorded after this pass
    for index, candidate in enumerate(candidates):
        if index >= batch or time.monotonic() > deadline:
            first_left = first_left or candidate.updated
            break
        record = instance.get_run_record_by_id(candidate.run_id)
        if record is None:  # deleted since the query: nothing to record
            continue
        try:
            record_run(instance, record, engine)
            report.recorded.append(candidate.run_id)
        except Exception as exc:  # noqa: BLE001 - one unreadable run must not stop the others
            log.exception("could not record run %s in the execution history", candidate.run_id)
            report.failed[candidate.run_id] = f"{type(exc).__name__}: {exc}"[:300]
            first_left = first_left or candidate.updated
    report.caught_up = first_left is None
    target = (now - RECORDED_THROUGH_MARGIN) if first_left is None else first_left
    if mark is None or target > mark:
        store.advance_recorded_through(engine, target)
    with engine.connect() as conn:
        report.recorded_through = store.recorded_through(conn)
    return report
