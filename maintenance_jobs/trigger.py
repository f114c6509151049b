"""Launching a task now (the REST API's manual trigger).

The run is launched through the Dagster webserver's GraphQL API (`orchestration_core.dagster_webserver`): the
webserver resolves the job in the `maintenance_jobs` code location, so the run carries that location's origin and
image, and the instance's run coordinator queues it under the same priority and limit-of-5 rules as scheduled runs.
"""

from __future__ import annotations

from maintenance_jobs.models import Task, config_problem
from maintenance_jobs.run_spec import job_and_op_names, run_config_for, run_tags_for
from maintenance_jobs.settings import MaintenanceSettings, maintenance_settings
from orchestration_core.dagster_webserver import DagsterWebserverClient

LOCATION_NAME = "maintenance_jobs"
DEFINITIONS_MODULE = "maintenance_jobs.definitions"
# Definitions objects load as a repository of this name.
REPOSITORY_NAME = "__repository__"


# The settings each built-in executor's resources need (definitions.py's dg.EnvVar) when its run is launched, by
# variable name. The API and the maintenance code location share one environment block in compose (x-runtime-env), so
# the API can check them before asking the webserver, whose answer to a missing EnvVar is an opaque HTTP 500.
REQUIRED_ENV: dict[str, tuple[str, ...]] = {"doc_sync_executor": ("GITEA_URL", "GITEA_TOKEN")}


class TaskNotRunnable(RuntimeError):
    """The task cannot be launched in this deployment (e.g. settings its executor needs are not set)."""


class TaskRefused(ValueError):
    """The current settings refuse the task's stored config: fix, disable or delete it (the API answers 409)."""


def check_runnable(task: Task, settings: MaintenanceSettings | None = None) -> None:
    """TaskNotRunnable naming the missing (unset or empty) settings the task's executor needs."""
    settings = settings or maintenance_settings()
    missing = [name for name in REQUIRED_ENV.get(task.executor, ()) if not getattr(settings, name.lower())]
    if missing:
        raise TaskNotRunnable(
            f"task {task.task_name!r} cannot run: {task.executor} needs {', '.join(missing)}, "
            "which the deployment does not set"
        )


def trigger_task(webserver: DagsterWebserverClient, task: Task, triggered_by: str = "manual") -> str:
    """Queue a run of `task` now (tagged `triggered_by`) through the webserver and return its run id."""
    problem = config_problem(task)
    if problem is not None:
        raise TaskRefused(f"task {task.task_name!r} is refused by the current settings: {problem}")
    check_runnable(task)
    job_name, _ = job_and_op_names(task.executor)
    return webserver.launch_run(
        location_name=LOCATION_NAME,
        repository_name=REPOSITORY_NAME,
        job_name=job_name,
        run_config=run_config_for(task),
        tags=run_tags_for(task, triggered_by),
    )
