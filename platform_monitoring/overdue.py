"""How long each scheduled thing may go without a success: every enabled maintenance task from its own cron fields,
every scheduled job of the code locations from its schedule (as the webserver's catalog describes it). One generic alert rule compares these with the time since the last success, so a
task added through the API is covered without touching a rule.

expected interval: the longest gap between two consecutive due times of the cron, on the wall clock (a daily task
    24 h, a task due on the 31st up to 61 days), or what a schedule declares in its metadata under
    EXPECTED_INTERVAL_METADATA when it skips ticks by design (card_refresh stops after the day's last race).
grace: how long a due run may legitimately take to succeed. A task: its timeout once per attempt
    (timeout_seconds x (max_retries + 1)); a racing job: the waits of its step retry policy (the morning scrape's
    3 x 30 min, which also covers empty combinations tried again three times; job_policies.py). Both plus a slack of a quarter of the
    interval, at least 1 minute and at most 1 hour (queueing, the dispatcher's minute, the clock change's hour).

A task counts as overdue when the time since its last successful run (since it was created, if it never succeeded)
exceeds interval + grace.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from functools import lru_cache

import sqlalchemy as sa
from croniter import croniter

from maintenance_jobs.database.tables import scheduled_tasks
from maintenance_jobs.execution_history.run_storage import RunStorage, connect
from maintenance_jobs.executor_configs import BUILTIN_CONFIGS
from maintenance_jobs.schedule import CronFields, cron_expression
from orchestration_core.dagster_schema import run_tags, runs
from orchestration_core.run_outcome import EXPECTED_INTERVAL_METADATA, TAG_MAINTENANCE_TASK
from platform_monitoring.catalog import Definition
from platform_monitoring.job_policies import JobPolicy

# The maintenance location runs each built-in executor in the job of the same name and every plug-in executor in
# this one (maintenance_jobs/jobs.py; tests/control_api/test_job_policies.py checks the two agree).
PLUGIN_JOB_NAME = "plugin_executor"

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
    return TaskSchedule(name, executor, task_job_name(executor), interval, grace, max_retries, created_at.timestamp())


def task_job_name(executor: str) -> str:
    """The maintenance job a task of `executor` runs in."""
    return executor if executor in BUILTIN_CONFIGS else PLUGIN_JOB_NAME


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


def task_last_successes(storage: RunStorage, tasks: Iterable[str]) -> dict[str, float]:
    """End time of each task's newest successful run, in one grouped query over the indexed task tag (retention keeps
    the latest success of every task whatever its age)."""
    names = list(tasks)
    if not names:
        return {}
    tag = run_tags
    query = (sa.select(tag.c.value, sa.func.max(runs.c.end_time))
             .select_from(runs.join(tag, tag.c.run_id == runs.c.run_id))
             .where(tag.c.key == TAG_MAINTENANCE_TASK, tag.c.value.in_(names), runs.c.status == "SUCCESS")
             .group_by(tag.c.value))
    with connect(storage) as conn:
        return {name: end for name, end in conn.execute(query) if end is not None}


@dataclass(frozen=True)
class JobSchedule:
    """A job that runs on a schedule, as the JobOverdue rule sees it."""

    job: str
    location: str
    schedule: str
    expected_interval_seconds: float
    grace_seconds: float


def job_schedule(item: Definition, policy: JobPolicy | None) -> JobSchedule:
    """Pure: a schedule's job with its expected interval (declared, else from the cron) and grace (its steps' retry
    waits; none known: none)."""
    declared = item.metadata.get(EXPECTED_INTERVAL_METADATA)
    if declared is not None:
        interval = float(declared)
    else:
        crons = [item.cron_schedule] if isinstance(item.cron_schedule, str) else item.cron_schedule
        interval = min(longest_cron_gap_seconds(cron) for cron in crons)
    grace = (policy.retry_window_seconds if policy else 0.0) + slack_seconds(interval)
    return JobSchedule(item.job_name, item.location, item.name, interval, grace)


def scheduled_jobs(items: Iterable[Definition], policies: Mapping[tuple[str, str], JobPolicy]) -> list[JobSchedule]:
    """Every job of a running-by-default schedule of every location."""
    return [job_schedule(item, policies.get((item.location, item.job_name))) for item in items
            if item.kind == "schedule" and item.default_running]
