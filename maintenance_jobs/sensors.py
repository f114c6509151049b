"""The dispatcher (launches due tasks every minute) and the sensors that record ended runs in the registry (the task
row's last status and the execution history, with a backfill pass for any run the status sensors missed)."""

# No `from __future__ import annotations`: Dagster reads op/sensor parameter types at definition time.

import datetime as dt
from dataclasses import dataclass, field

import dagster as dg
from maintenance_jobs.dispatch import scheduled_run_request
from maintenance_jobs.execution_history.recorder import backfill_history, record_run
from maintenance_jobs.execution_history.store import record_skip
from maintenance_jobs.execution_history.summary import classify_run_end
from maintenance_jobs.jobs import MAINTENANCE_JOBS
from maintenance_jobs.lost_runs import guard_tick, tick_summary
from maintenance_jobs.models import config_problem
from maintenance_jobs.registry import DueRun, due_runs
from maintenance_jobs.resources import MaintenanceRegistryResource
from maintenance_jobs.schedule import ONE_MINUTE, plan_window, wall_clock_slots
from maintenance_jobs.tags import TAG_TASK
from orchestration_core.audit.alert_webhook import AlertWebhook


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
    engine = registry.engine()
    if window.skipped_minutes:
        notice = (
            f"catch-up limited to the last {len(window.minutes)} minutes: "
            f"{window.skipped_minutes} older minutes since {cursor} were skipped"
        )
        # Recorded per range (idempotent: a tick evaluated again writes the same row), so the per-task history can
        # say why an expected run of those minutes never launched.
        first_skipped = parse_cursor(cursor) + ONE_MINUTE
        record_skip(engine, first_skipped, window.minutes[0], (
            f"the dispatcher was not evaluating minutes from {first_skipped.isoformat()} to "
            f"{(window.minutes[0] - ONE_MINUTE).isoformat()} (downtime); on resuming it catches up only the last "
            f"{registry.max_catchup_minutes} minutes (MAINTENANCE_MAX_CATCHUP_MINUTES)"))
    due = due_runs(engine, wall_clock_slots(window.minutes, registry.timezone))
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


def record_finished_run(instance: dg.DagsterInstance, run: dg.DagsterRun, registry: MaintenanceRegistryResource) -> str:
    """Record a finished run: its summary in the execution history and, for a task's run, the task row's last
    status, start, duration and retry count; the run is tagged with its status. Returns the status, or
    "no task tag" for a run of a maintenance job launched without a task (recorded under its job name)."""
    record = instance.get_run_record_by_id(run.run_id)
    if record is None:
        return "deleted"
    status = record_run(instance, record, registry.engine())
    return status if run.tags.get(TAG_TASK) else "no task tag"


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


@dg.sensor(
    name="maintenance_history_backfill",
    minimum_interval_seconds=60,
    default_status=dg.DefaultSensorStatus.RUNNING,
    description="Every minute: record in the execution history every ended maintenance run the run status sensors "
    "did not (a registry outage, a restart, the runs of an install that predates the history), oldest first.",
)
def maintenance_history_backfill(
    context: dg.SensorEvaluationContext, maintenance_registry: MaintenanceRegistryResource
) -> dg.SkipReason:
    report = backfill_history(context.instance, maintenance_registry.engine(), utc_now())
    if report.failed:
        # A failed tick is what Dagster (and the tick alerts) report; the runs recorded in this pass stay recorded.
        raise RuntimeError(report.summary())
    return dg.SkipReason(report.summary())


record_maintenance_success = _status_sensor("record_maintenance_success", dg.DagsterRunStatus.SUCCESS)
record_maintenance_failure = _status_sensor("record_maintenance_failure", dg.DagsterRunStatus.FAILURE)
record_maintenance_canceled = _status_sensor("record_maintenance_canceled", dg.DagsterRunStatus.CANCELED)
MAINTENANCE_SENSORS = [
    maintenance_dispatcher,
    maintenance_run_guard,
    record_maintenance_success,
    record_maintenance_failure,
    record_maintenance_canceled,
    maintenance_history_backfill,
]
__all__ = ["classify_run_end", "dispatch_tick", "record_finished_run"]
