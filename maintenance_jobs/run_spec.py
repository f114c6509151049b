"""From a task row to what its run is: the job and op names, run config and tags (shared by the dispatcher sensor,
manual triggers through the webserver and the lost-run re-launch).

Dagster-free (the control API launches through the webserver's GraphQL by job name and does not import Dagster):
the names here are those of the job definitions in jobs.py (tests/maintenance_jobs/test_run_spec.py checks they
agree); dispatch.py adds the Dagster objects (the JobDefinition, the sensor's RunRequest).
"""

from __future__ import annotations

import datetime as dt
import json
from typing import Any

from maintenance_jobs.models import Task
from maintenance_jobs.schedule import local_iso
from maintenance_jobs.tags import (
    TAG_EXECUTOR,
    TAG_PRIORITY,
    TAG_SERVICE,
    TAG_TASK,
    TAG_TRIGGERED_BY,
    TRIGGERED_BY,
)
from orchestration_core.run_outcome import KIND_MAINTENANCE, TAG_KIND

# executor -> (job name, op name) of the built-in executors; every other executor is a plug-in run by PLUGIN_JOB.
BUILTIN_JOBS: dict[str, tuple[str, str]] = {
    "example_executor": ("example_executor", "run_example_executor"),
    "doc_sync_executor": ("doc_sync_executor", "run_doc_sync_executor"),
    "config_backup_executor": ("config_backup_executor", "run_config_backup_executor"),
    "postgres_backup_executor": ("postgres_backup_executor", "run_postgres_backup_executor"),
}
PLUGIN_JOB = ("plugin_executor", "run_plugin_executor")


def job_and_op_names(executor: str) -> tuple[str, str]:
    """(job name, op name) of the job that runs `executor`."""
    return BUILTIN_JOBS.get(executor, PLUGIN_JOB)


def run_config_for(task: Task) -> dict[str, Any]:
    """The task's config as the run config of its executor's op."""
    _, op_name = job_and_op_names(task.executor)
    if task.executor in BUILTIN_JOBS:
        op_config: dict[str, Any] = dict(task.config)
    else:
        op_config = {"executor": task.executor, "config_json": json.dumps(task.config, sort_keys=True)}
    return {"ops": {op_name: {"config": op_config}}}


def dagster_priority(priority: int) -> str:
    """Dagster dequeues higher `dagster/priority` first; the registry's 1 is the most urgent, so invert."""
    return str(100 - priority)


def run_tags_for(task: Task, triggered_by: str) -> dict[str, str]:
    if triggered_by not in TRIGGERED_BY:
        raise ValueError(f"triggered_by must be one of {TRIGGERED_BY}, not {triggered_by!r}")
    return {
        TAG_TASK: task.task_name,
        TAG_SERVICE: task.service,
        TAG_EXECUTOR: task.executor,
        TAG_TRIGGERED_BY: triggered_by,
        TAG_PRIORITY: str(task.priority),
        TAG_KIND: KIND_MAINTENANCE,
        "dagster/priority": dagster_priority(task.priority),
        # Enforced by run monitoring (dagster.yaml run_monitoring.enabled); reported as `timeout`.
        "dagster/max_runtime": str(task.timeout_seconds),
        "dagster/max_retries": str(task.max_retries),
        # Run retries in dagster.yaml cover crashes only; a task's max_retries also covers failures.
        "dagster/retry_on_asset_or_op_failure": "true",
    }


def run_key_for(task_name: str, minute: dt.datetime, timezone: str) -> str:
    return f"{task_name}:{local_iso(minute, timezone)}"
