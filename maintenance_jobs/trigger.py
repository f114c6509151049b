"""Launching a task now, from any process that can reach the Dagster instance (e.g. the REST API).

The run is created in the instance with the origin of the `maintenance_jobs` code location and submitted to the
run coordinator, so it queues under the same priority and limit-of-5 rules as scheduled runs; the daemon launches it
through the workspace's code server for that location.
"""

from __future__ import annotations

import os
import sys
from functools import lru_cache

import dagster as dg
from dagster._core.definitions.reconstruct import ReconstructableRepository
from dagster._core.origin import JobPythonOrigin
from dagster._core.remote_origin import (
    ManagedGrpcPythonEnvCodeLocationOrigin,
    RemoteJobOrigin,
    RemoteRepositoryOrigin,
)
from dagster._core.types.loadable_target_origin import LoadableTargetOrigin

from maintenance_jobs.dispatch import job_and_op, run_config_for, run_tags_for
from maintenance_jobs.models import Task

LOCATION_NAME = "maintenance_jobs"
DEFINITIONS_MODULE = "maintenance_jobs.definitions"
# Definitions objects load as a repository of this name.
REPOSITORY_NAME = "__repository__"


@lru_cache(maxsize=1)
def _definitions() -> dg.Definitions:
    from maintenance_jobs.definitions import defs

    return defs


def job_origins(job_name: str, working_directory: str | None = None) -> tuple[RemoteJobOrigin, JobPythonOrigin]:
    """Where the daemon (remote origin: the code location) and a run worker (python origin) find the job."""
    working_directory = working_directory or os.getcwd()
    loadable = LoadableTargetOrigin(
        executable_path=sys.executable, module_name=DEFINITIONS_MODULE, working_directory=working_directory
    )
    location = ManagedGrpcPythonEnvCodeLocationOrigin(loadable_target_origin=loadable, location_name=LOCATION_NAME)
    remote = RemoteJobOrigin(RemoteRepositoryOrigin(location, REPOSITORY_NAME), job_name)
    repository = ReconstructableRepository.for_module(DEFINITIONS_MODULE, "defs", working_directory)
    python = JobPythonOrigin(job_name, repository.get_python_origin())
    return remote, python


def trigger_task(instance: dg.DagsterInstance, task: Task, triggered_by: str = "manual") -> str:
    """Queue a run of `task` now (tagged `triggered_by`) and return its run id."""
    job, _ = job_and_op(task.executor)
    job_def = _definitions().resolve_job_def(job.name)
    remote, python = job_origins(job.name)
    run = instance.create_run_for_job(
        job_def,
        run_config=run_config_for(task),
        tags={**job_def.tags, **run_tags_for(task, triggered_by)},
        remote_job_origin=remote,
        job_code_origin=python,
    )
    instance.submit_run(run.run_id, workspace=None)
    return run.run_id
