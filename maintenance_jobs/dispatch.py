"""From a task row to a Dagster run request (the dispatcher sensor) and to its job definition; the run config and
tags are run_spec.py's (Dagster-free, shared with manual triggers)."""

from __future__ import annotations

import datetime as dt

import dagster as dg
from maintenance_jobs.jobs import BUILTIN_JOBS, PLUGIN_JOB
from maintenance_jobs.models import Task
from maintenance_jobs.run_spec import (  # noqa: F401 (the sensor's and callers' names for them)
    dagster_priority,
    run_config_for,
    run_key_for,
    run_tags_for,
)
from maintenance_jobs.schedule import local_iso
from maintenance_jobs.tags import TAG_SCHEDULED_MINUTE


def job_and_op(executor: str) -> tuple[dg.JobDefinition, str]:
    return BUILTIN_JOBS.get(executor, PLUGIN_JOB)


def scheduled_run_request(task: Task, minute: dt.datetime, timezone: str) -> dg.RunRequest:
    """The dispatcher's request for `task` due at `minute`; the run key makes it launch at most once."""
    job, _ = job_and_op(task.executor)
    tags = run_tags_for(task, "scheduler") | {TAG_SCHEDULED_MINUTE: local_iso(minute, timezone)}
    return dg.RunRequest(
        run_key=run_key_for(task.task_name, minute, timezone),
        job_name=job.name,
        run_config=run_config_for(task),
        tags=tags,
    )
