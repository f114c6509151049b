"""Origins of the maintenance jobs, for tests that create runs by hand the way the daemon would see them.

Production never builds origins itself (manual triggers launch through the webserver's GraphQL API), so this lives
with the tests; it uses Dagster's private origin types.
"""

from __future__ import annotations

import os
import sys

from dagster._core.definitions.reconstruct import ReconstructableRepository
from dagster._core.origin import JobPythonOrigin
from dagster._core.remote_origin import (
    ManagedGrpcPythonEnvCodeLocationOrigin,
    RemoteJobOrigin,
    RemoteRepositoryOrigin,
)
from dagster._core.types.loadable_target_origin import LoadableTargetOrigin

from maintenance_jobs.trigger import DEFINITIONS_MODULE, LOCATION_NAME, REPOSITORY_NAME


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
