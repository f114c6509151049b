"""Launching a task now (the REST API's manual trigger).

The run is launched through the Dagster webserver's GraphQL API (`orchestration_core.dagster_webserver`): the webserver resolves the job in
the `maintenance_jobs` code location, so the run carries that location's origin and image, and the instance's run
coordinator queues it under the same priority and limit-of-5 rules as scheduled runs.
"""

from __future__ import annotations

from maintenance_jobs.dispatch import job_and_op, run_config_for, run_tags_for
from maintenance_jobs.models import Task
from orchestration_core.dagster_webserver import DagsterWebserverClient

LOCATION_NAME = "maintenance_jobs"
DEFINITIONS_MODULE = "maintenance_jobs.definitions"
# Definitions objects load as a repository of this name.
REPOSITORY_NAME = "__repository__"


def trigger_task(webserver: DagsterWebserverClient, task: Task, triggered_by: str = "manual") -> str:
    """Queue a run of `task` now (tagged `triggered_by`) through the webserver and return its run id."""
    job, _ = job_and_op(task.executor)
    return webserver.launch_run(
        location_name=LOCATION_NAME,
        repository_name=REPOSITORY_NAME,
        job_name=job.name,
        run_config=run_config_for(task),
        tags=run_tags_for(task, triggered_by),
    )
