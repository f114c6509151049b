"""How long each scheduled thing may go without a success: every enabled maintenance task from its own cron fields,
every racing job from its schedule. One generic alert rule compares these with the time since the last success, so a
task added through the API is covered without touching a rule.

expected interval: the longest gap between two consecutive due times of the cron, on the wall clock (a daily task
    24 h, a task due on the 31st up to 61 days), or what a schedule declares in its metadata under
    EXPECTED_INTERVAL_METADATA when it skips ticks by design (card_refresh stops after the day's last race).
grace: how long a due run may legitimately take to succeed. A task: its timeout once per attempt
    (timeout_seconds x (max_retries + 1)); a racing job: the waits of its step retry policy (the morning scrape's
    3 x 30 min, which also covers empty combinations tried again three times). Both plus a slack of a quarter of the
    interval, at least 1 minute and at most 1 hour (queueing, the dispatcher's minute, the clock change's hour).

A task counts as overdue when the time since its last successful run (since it was created, if it never succeeded)
exceeds interval + grace.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterable
from dataclasses import dataclass
from functools import lru_cache

import dagster as dg
import sqlalchemy as sa
from croniter import croniter

from control_api.schedulers import Definition, load_jobs
from maintenance_jobs.database.tables import scheduled_tasks
from maintenance_jobs.dispatch import job_and_op
from maintenance_jobs.schedule import CronFields, cron_expression
from orchestration_core.dagster_internals import RunsTable, RunTagsTable
from orchestration_core.run_outcome import EXPECTED_INTERVAL_METADATA, TAG_MAINTENANCE_TASK

MIN_SLACK_SECONDS = 60.0
MAX_SLACK_SECONDS = 3600.0
# Enough due times to see every gap of a cron made of fixed-or-any fields: a year of a daily one, two days of an
# every-minute one (whose longest gap is found within a day).
CRON_HORIZON = dt.timedelta(days=400)
CRON_MAX_STEPS = 3000
# Any fixed start: the gaps of a cron do not depend on where the scan begins once it covers a year (leap years aside,
# which the 400 days include).
_SCAN_START = dt.datetime(2025, 1, 1)


@lru_cache(maxsize=1024)
def longest_cron_gap_seconds(expression: str, day_or: bool = True) -> float:
    """The longest wall-clock gap between consecutive due times of `expression`. `day_or=False` is the task
    registry's rule (day of month AND day of week must both match). A schedule with several crons is given the
    smallest of their gaps (an upper bound of the gaps of their union: it alerts late, never falsely)."""
    cron = croniter(expression, _SCAN_START, day_or=day_or)
    previous = cron.get_next(dt.datetime)
    longest = 0.0
    for _ in range(CRON_MAX_STEPS):
        moment = cron.get_next(dt.datetime)
        longest = max(longest, (moment - previous).total_seconds())
        previous = moment
        if moment - _SCAN_START > CRON_HORIZON:
            break
    return longest


def slack_seconds(interval: float) -> float:
    return min(MAX_SLACK_SECONDS, max(MIN_SLACK_SECONDS, interval / 4))


@dataclass(frozen=True)
class TaskSchedule:
    """One enabled registry task as the TaskOverdue rule sees it."""

    task: str
    executor: str
    job: str
    expected_interval_seconds: float
    grace_seconds: float
    max_retries: int
    created_at: float  # unix time; where "since the last success" starts for a task that never succeeded


def task_schedule(name: str, executor: str, fields: CronFields, timeout_seconds: int, max_retries: int,
                  created_at: dt.datetime) -> TaskSchedule:
    """Pure: a task row's expected interval and grace."""
    interval = longest_cron_gap_seconds(cron_expression(fields), day_or=False)
    grace = timeout_seconds * (max_retries + 1) + slack_seconds(interval)
    job, _ = job_and_op(executor)
    return TaskSchedule(name, executor, job.name, interval, grace, max_retries, created_at.timestamp())


def enabled_task_schedules(registry: sa.Engine) -> list[TaskSchedule]:
    t = scheduled_tasks
    query = sa.select(t.c.task_name, t.c.executor, t.c.minute, t.c.hour, t.c.day_of_month, t.c.month,
                      t.c.day_of_week, t.c.timeout_seconds, t.c.max_retries, t.c.created_at) \
        .where(t.c.enabled.is_(True)).order_by(t.c.task_name)
    with registry.connect() as conn:
        rows = conn.execute(query).all()
    return [task_schedule(r.task_name, r.executor, CronFields(r.minute, r.hour, r.day_of_month, r.month,
                                                                r.day_of_week),
                          r.timeout_seconds, r.max_retries, r.created_at) for r in rows]


def task_last_successes(instance: dg.DagsterInstance, tasks: Iterable[str]) -> dict[str, float]:
    """End time of each task's newest successful run, in one grouped query over the indexed task tag (retention keeps
    the latest success of every task whatever its age)."""
    names = list(tasks)
    if not names:
        return {}
    runs, tag = RunsTable, RunTagsTable
    query = (sa.select(tag.c.value, sa.func.max(runs.c.end_time))
             .select_from(runs.join(tag, tag.c.run_id == runs.c.run_id))
             .where(tag.c.key == TAG_MAINTENANCE_TASK, tag.c.value.in_(names), runs.c.status == "SUCCESS")
             .group_by(tag.c.value))
    with instance.run_storage.connect() as conn:
        return {name: end for name, end in conn.execute(query) if end is not None}


@dataclass(frozen=True)
class JobSchedule:
    """A job that runs on a schedule, as the JobOverdue rule sees it."""

    job: str
    location: str
    schedule: str
    expected_interval_seconds: float
    grace_seconds: float


def retry_window_seconds(job: dg.JobDefinition) -> float:
    """The longest total wait of any step's retry policy in `job` (jitter at its largest)."""
    longest = 0.0
    for handle in job.graph.iterate_node_handles():
        policy = job.get_retry_policy_for_handle(handle)
        if policy is None or not policy.max_retries:
            continue
        delays = [dg.RetryPolicy(max_retries=policy.max_retries, delay=policy.delay, backoff=policy.backoff)
                  .calculate_delay(attempt) for attempt in range(1, policy.max_retries + 1)]
        jitter = (policy.delay or 0) * policy.max_retries if policy.jitter == dg.Jitter.PLUS_MINUS else 0
        longest = max(longest, sum(delays) + jitter)
    return longest


def job_schedule(item: Definition, job: dg.JobDefinition) -> JobSchedule:
    """Pure: a schedule's job with its expected interval (declared, else from the cron) and grace."""
    schedule: dg.ScheduleDefinition = item.definition
    declared = schedule.metadata.get(EXPECTED_INTERVAL_METADATA)
    if declared is not None:
        interval = float(getattr(declared, "value", declared))
    else:
        crons = [schedule.cron_schedule] if isinstance(schedule.cron_schedule, str) else schedule.cron_schedule
        interval = min(longest_cron_gap_seconds(cron) for cron in crons)
    grace = retry_window_seconds(job) + slack_seconds(interval)
    return JobSchedule(job.name, item.location, schedule.name, interval, grace)


def scheduled_jobs(items: Iterable[Definition]) -> list[JobSchedule]:
    """Every job of a running-by-default schedule of both locations (the definitions the control API loaded)."""
    jobs = load_jobs()
    return [job_schedule(item, jobs[(item.location, item.definition.job_name)]) for item in items
            if item.kind == "schedule" and item.definition.default_status.value == "RUNNING"]
