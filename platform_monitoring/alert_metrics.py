"""The `/metrics` families the alert rules compare against (deploy/prometheus/alerts.yml, docs/alerts.md).

Each is computed at scrape time like the rest of `/metrics`, from storage the control API reads itself, never from
the code servers (they may be what is down):
- every schedule and sensor of both locations: running or stopped, failed ticks in a row and the last error,
  lateness (the instance's schedule storage);
- whether the daemon is up (heartbeats and sensor ticks) and whether each code server answers a ping;
- per enabled maintenance task and per scheduled racing job: the last success, the expected interval and the grace
  (platform_monitoring/overdue.py), so one rule covers every task;
- per job and per task: the highest retry number seen and the maximum its own policy allows;
- per database of the Postgres backup: when its newest dump was written (the executor's asset materializations).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Iterator, Mapping, Sequence

from prometheus_client.core import GaugeMetricFamily, Metric

from platform_monitoring.catalog import Job
from platform_monitoring.job_policies import JobPolicy
from platform_monitoring.overdue import JobSchedule, TaskSchedule
from platform_monitoring.schedulers import TickState
from maintenance_jobs.execution_history import tag_values
from maintenance_jobs.executor_configs import POSTGRES_BACKUP_ASSET_PREFIX, POSTGRES_DATABASES

INSTIGATOR_LABELS = ["location", "type", "name"]
TAG_MAX_RETRIES = "dagster/max_retries"


def instigator_families(states: Iterable[TickState]) -> Iterator[Metric]:
    running = GaugeMetricFamily("orchestration_instigator_running",
                                "1 when the schedule or sensor is running; default is its status in code",
                                labels=[*INSTIGATOR_LABELS, "default"])
    last_tick = GaugeMetricFamily("orchestration_instigator_last_tick_timestamp_seconds",
                                  "Unix time of its newest tick", labels=INSTIGATOR_LABELS)
    failed = GaugeMetricFamily("orchestration_instigator_failed_ticks_in_a_row",
                               "Consecutive failed ticks up to its newest finished tick", labels=INSTIGATOR_LABELS)
    interval = GaugeMetricFamily("orchestration_instigator_interval_seconds",
                                 "A sensor's minimum interval; a schedule's gap between its next two cron times",
                                 labels=INSTIGATOR_LABELS)
    late = GaugeMetricFamily("orchestration_instigator_tick_late_seconds",
                             "Seconds since a tick it should have made (0 on time); running ones the daemon knows",
                             labels=INSTIGATOR_LABELS)
    error = GaugeMetricFamily("orchestration_instigator_last_error_info",
                              "1 for a failing schedule or sensor, with the error of its newest failed tick",
                              labels=[*INSTIGATOR_LABELS, "error"])
    for state in states:
        labels = [state.location, state.kind, state.name]
        running.add_metric([*labels, "running" if state.default_running else "stopped"], 1.0 if state.running else 0.0)
        if state.last_tick_at is not None:
            last_tick.add_metric(labels, state.last_tick_at)
        failed.add_metric(labels, state.failed_in_a_row)
        interval.add_metric(labels, state.interval_seconds)
        if state.late_seconds is not None:
            late.add_metric(labels, round(state.late_seconds, 3))
        if state.failed_in_a_row and state.last_error:
            error.add_metric([*labels, state.last_error], 1.0)
    yield from (running, last_tick, failed, interval, late, error)


def code_server_families(code_servers: Mapping[str, str]) -> Iterator[Metric]:
    servers = GaugeMetricFamily("orchestration_code_server_up", "1 when the location's code server answers a ping",
                                labels=["location"])
    for location, state in sorted(code_servers.items()):
        servers.add_metric([location], 1.0 if state == "ok" else 0.0)
    yield servers


def task_schedule_families(tasks: Sequence[TaskSchedule], last_successes: Mapping[str, float]) -> Iterator[Metric]:
    labels = ["task", "executor"]
    success = GaugeMetricFamily("maintenance_task_last_success_timestamp_seconds",
                                "Unix time the task's newest successful run ended (absent if none)", labels=labels)
    created = GaugeMetricFamily("maintenance_task_created_timestamp_seconds", "Unix time the task was created",
                                labels=labels)
    interval = GaugeMetricFamily("maintenance_task_expected_interval_seconds",
                                 "Longest gap between two due times of the task's cron", labels=labels)
    grace = GaugeMetricFamily("maintenance_task_grace_seconds",
                              "How long a due run may take to succeed: timeout x attempts plus slack", labels=labels)
    for task in tasks:
        values = [task.task, task.executor]
        if task.task in last_successes:
            success.add_metric(values, last_successes[task.task])
        created.add_metric(values, task.created_at)
        interval.add_metric(values, task.expected_interval_seconds)
        grace.add_metric(values, task.grace_seconds)
    yield from (success, created, interval, grace)


def job_schedule_families(jobs: Sequence[JobSchedule]) -> Iterator[Metric]:
    interval = GaugeMetricFamily("orchestration_job_expected_interval_seconds",
                                 "Longest gap between two runs of the job's schedule (or what it declares)",
                                 labels=["job", "location"])
    grace = GaugeMetricFamily("orchestration_job_grace_seconds",
                              "How long a scheduled run may take to succeed: its retry waits plus slack",
                              labels=["job", "location"])
    for job in jobs:
        interval.add_metric([job.job, job.location], job.expected_interval_seconds)
        grace.add_metric([job.job, job.location], job.grace_seconds)
    yield from (interval, grace)


# ---- retry limits: each job's own step retry policy, each task's own max_retries -----------------------------------


def step_retry_limits(jobs: Iterable[Job], policies: Mapping[tuple[str, str], JobPolicy]) -> dict[str, int]:
    """job name -> the most retries any of its steps' policies allows (0: none retries, or none known)."""
    limits: dict[str, int] = {}
    for job in jobs:
        policy = policies.get((job.location, job.name))
        limits[job.name] = max(limits.get(job.name, 0), policy.max_step_retries if policy else 0)
    return limits


def run_retry_limits(jobs: Iterable[Job], instance_default: int,
                     tasks: Iterable[TaskSchedule]) -> dict[tuple[str, str], int]:
    """(job, task) -> how many run-level retries Dagster may start: a job's `dagster/max_retries` tag or the
    instance's run_retries default (task ""), and each maintenance task's own max_retries (its runs carry it)."""
    limits = {}
    for job in jobs:
        tag = job.tags.get(TAG_MAX_RETRIES)
        limit = tag_values.retry_limit(None if tag is None else str(tag))
        limits[(job.name, "")] = instance_default if limit is None else limit
    for task in tasks:
        limits[(task.job, task.task)] = task.max_retries
    return limits


def retry_limit_families(step_limits: Mapping[str, int], run_limits: Mapping[tuple[str, str], int]) -> Iterator[Metric]:
    step = GaugeMetricFamily("orchestration_step_retry_limit", "The most step retries the job's policies allow",
                             labels=["job"])
    for job, limit in sorted(step_limits.items()):
        step.add_metric([job], limit)
    run = GaugeMetricFamily("orchestration_run_retry_limit",
                            "The most run retries allowed: the job's (task \"\") or the maintenance task's",
                            labels=["job", "task"])
    for (job, task), limit in sorted(run_limits.items()):
        run.add_metric([job, task], limit)
    yield from (step, run)


def highest_family(name: str, documentation: str, labels: list[str],
                   numbers: Iterable[tuple[tuple[str, ...], int]]) -> Metric:
    """The highest retry number per label values (each `numbers` item: label values, number)."""
    highest: dict[tuple[str, ...], int] = defaultdict(int)
    for values, number in numbers:
        highest[values] = max(highest[values], number)
    family = GaugeMetricFamily(name, documentation, labels=labels)
    for values, number in sorted(highest.items()):
        family.add_metric(list(values), number)
    return family



# ---- the Postgres backup: each database's newest successful dump ---------------------------------------------------


def postgres_backup_families(last_successes: Mapping[str, float]) -> Iterator[Metric]:
    """One `maintenance_postgres_backup_databases` series per database the backup must cover (what
    PostgresBackupNeverSucceeded compares against) and, per database with one, its newest dump's time."""
    databases = GaugeMetricFamily("maintenance_postgres_backup_databases",
                                  "1 for each database the nightly Postgres backup must cover", labels=["database"])
    success = GaugeMetricFamily("maintenance_postgres_backup_last_success_timestamp_seconds",
                                "Unix time the database's newest complete dump (with its sha256) was written",
                                labels=["database"])
    for database in POSTGRES_DATABASES:
        databases.add_metric([database], 1.0)
        if database in last_successes:
            success.add_metric([database], last_successes[database])
    yield from (databases, success)


def postgres_backup_asset_key(database: str) -> list[str]:
    return [POSTGRES_BACKUP_ASSET_PREFIX, database]
