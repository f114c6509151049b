"""The dispatcher (launches due tasks every minute) and the sensors that write run results back to the registry."""

# No `from __future__ import annotations`: Dagster reads op/sensor parameter types at definition time.

import datetime as dt
from collections.abc import Iterable
from dataclasses import dataclass, field

import dagster as dg
from maintenance_jobs.dispatch import scheduled_run_request
from maintenance_jobs.jobs import MAINTENANCE_JOBS
from maintenance_jobs.lost_runs import MAX_RUNTIME_MARKER, guard_tick, tick_summary
from maintenance_jobs.models import config_problem
from maintenance_jobs.registry import DueRun, due_runs, record_run_end
from maintenance_jobs.resources import MaintenanceRegistryResource
from maintenance_jobs.schedule import plan_window, wall_clock_slots
from maintenance_jobs.tags import TAG_STATUS, TAG_TASK
from orchestration_core.audit.alert_webhook import AlertWebhook
from orchestration_core.run_outcome import TAG_OUTCOME, Outcome, failure_reason, outcome_tags


def utc_now() -> dt.datetime:
    """The dispatcher's clock (UTC, whatever the machine's zone); tests replace it with a fake one."""
    return dt.datetime.now(dt.UTC)


def parse_cursor(cursor: str | None) -> dt.datetime | None:
    return dt.datetime.fromisoformat(cursor) if cursor else None


@dataclass(frozen=True)
class DispatchTick:
    result: dg.SensorResult
    catch_up_notice: str | None  # set when minutes older than the catch-up bound were skipped
    refused: list[str] = field(default_factory=list)  # due tasks the current settings refuse, with the reason


def dispatch_tick(registry: MaintenanceRegistryResource, cursor: str | None, now: dt.datetime) -> DispatchTick:
    """Run requests for every enabled task due in (cursor, now], most urgent first, and the new cursor."""
    window = plan_window(parse_cursor(cursor), now, registry.max_catchup_minutes)
    new_cursor = window.cursor.isoformat() if window.cursor else cursor
    if not window.minutes:
        skip = dg.SkipReason(f"minute {new_cursor} already evaluated")
        return DispatchTick(dg.SensorResult(skip_reason=skip, cursor=new_cursor), None)
    notice = None
    if window.skipped_minutes:
        notice = (
            f"catch-up limited to the last {len(window.minutes)} minutes: "
            f"{window.skipped_minutes} older minutes since {cursor} were skipped"
        )
    due = due_runs(registry.engine(), wall_clock_slots(window.minutes, registry.timezone))
    runnable, refused = split_refused(due)
    requests = [scheduled_run_request(d.task, d.minute, registry.timezone) for d in runnable]
    if not requests:
        span = f"{window.minutes[0].isoformat()}..{window.minutes[-1].isoformat()}"
        reason = "; ".join(refused) if refused else f"no task due in {span}"
        skip = dg.SkipReason(reason + (f"; {notice}" if notice else ""))
        return DispatchTick(dg.SensorResult(skip_reason=skip, cursor=new_cursor), notice, refused)
    return DispatchTick(dg.SensorResult(run_requests=requests, cursor=new_cursor), notice, refused)


def split_refused(due: list[DueRun]) -> tuple[list[DueRun], list[str]]:
    """The due runs to launch, and one note per task whose stored config the current settings refuse (never run;
    every other task runs as usual)."""
    problems: dict[str, str | None] = {}
    runnable = []
    for run in due:
        name = run.task.task_name
        if name not in problems:
            problems[name] = config_problem(run.task)
        if problems[name] is None:
            runnable.append(run)
    notes = [f"task {name} not run: refused by the current settings ({problem})"
             for name, problem in problems.items() if problem is not None]
    return runnable, notes


@dg.sensor(
    name="maintenance_dispatcher",
    jobs=MAINTENANCE_JOBS,
    minimum_interval_seconds=60,
    default_status=dg.DefaultSensorStatus.RUNNING,
    description="Every minute: launch each enabled registry task due since the last evaluated minute.",
)
def maintenance_dispatcher(
    context: dg.SensorEvaluationContext, maintenance_registry: MaintenanceRegistryResource
) -> dg.SensorResult:
    tick = dispatch_tick(maintenance_registry, context.cursor, utc_now())
    if tick.catch_up_notice:
        context.log.warning(tick.catch_up_notice)
    for note in tick.refused:  # in the tick's log (and in its skip reason when nothing else was due)
        context.log.warning(note)
    return tick.result


@dg.sensor(
    name="maintenance_run_guard",
    jobs=MAINTENANCE_JOBS,
    minimum_interval_seconds=60,
    default_status=dg.DefaultSensorStatus.RUNNING,
    description="Every minute: re-launch (bounded) or report maintenance runs that died for an infrastructure reason "
    "and that Dagster's run retries will not retry.",
)
def maintenance_run_guard(
    context: dg.SensorEvaluationContext, maintenance_registry: MaintenanceRegistryResource, alert_webhook: AlertWebhook
) -> dg.SensorResult:
    tick = guard_tick(context.instance, maintenance_registry.engine(), alert_webhook, utc_now())
    for note in tick.notes:
        context.log.warning(note)
    if tick.requests:
        return dg.SensorResult(run_requests=tick.requests)
    return dg.SensorResult(skip_reason=dg.SkipReason(tick_summary(tick.notes)))


def classify_run_end(status: dg.DagsterRunStatus, canceling_messages: Iterable[str]) -> str:
    """The registry status of a finished run: success, failed, timeout (max runtime exceeded) or canceled."""
    if any(MAX_RUNTIME_MARKER in (m or "") for m in canceling_messages):
        return "timeout"
    if status == dg.DagsterRunStatus.SUCCESS:
        return "success"
    if status == dg.DagsterRunStatus.CANCELED:
        return "canceled"
    return "failed"


def record_finished_run(instance: dg.DagsterInstance, run: dg.DagsterRun, registry: MaintenanceRegistryResource) -> str:
    """Write a finished run's status, start and duration to its task row and tag the run with the status."""
    task_name = run.tags.get(TAG_TASK)
    if not task_name:
        return "no task tag"
    if run.status == dg.DagsterRunStatus.FAILURE and TAG_OUTCOME not in run.tags:
        # Refused or lost before its op could record anything (a launch refused, a worker gone): say why anyway.
        reason = failure_reason(instance, run.run_id) or "the run failed before its op recorded an outcome"
        instance.add_run_tags(run.run_id, outcome_tags(Outcome.FAILED, 0, 1, reason))
    canceling = instance.get_records_for_run(run.run_id, of_type=dg.DagsterEventType.RUN_CANCELING).records
    messages = [r.event_log_entry.dagster_event.message or "" for r in canceling if r.event_log_entry.dagster_event]
    status = classify_run_end(run.status, messages)
    record = instance.get_run_record_by_id(run.run_id)
    start = record.start_time if record else None
    end = record.end_time if record else None
    started_at = dt.datetime.fromtimestamp(start or end or dt.datetime.now(dt.UTC).timestamp(), dt.UTC)
    duration = round(end - start, 3) if start and end else None
    record_run_end(registry.engine(), task_name, started_at=started_at, status=status, duration_seconds=duration)
    instance.add_run_tags(run.run_id, {TAG_STATUS: status})
    return status


def _status_sensor(name: str, run_status: dg.DagsterRunStatus) -> dg.RunStatusSensorDefinition:
    @dg.run_status_sensor(
        name=name,
        run_status=run_status,
        monitored_jobs=MAINTENANCE_JOBS,
        default_status=dg.DefaultSensorStatus.RUNNING,
        minimum_interval_seconds=15,
        description=f"Record {run_status.value} maintenance runs in the task registry.",
    )
    def _sensor(context: dg.RunStatusSensorContext, maintenance_registry: MaintenanceRegistryResource):
        status = record_finished_run(context.instance, context.dagster_run, maintenance_registry)
        context.log.info(f"{context.dagster_run.run_id}: recorded {status}")

    return _sensor


record_maintenance_success = _status_sensor("record_maintenance_success", dg.DagsterRunStatus.SUCCESS)
record_maintenance_failure = _status_sensor("record_maintenance_failure", dg.DagsterRunStatus.FAILURE)
record_maintenance_canceled = _status_sensor("record_maintenance_canceled", dg.DagsterRunStatus.CANCELED)
MAINTENANCE_SENSORS = [
    maintenance_dispatcher,
    maintenance_run_guard,
    record_maintenance_success,
    record_maintenance_failure,
    record_maintenance_canceled,
]
