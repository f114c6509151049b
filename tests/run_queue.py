"""The real QueuedRunCoordinator on Postgres with dagster.yaml's concurrency block, for the tests of queue order
(tests/maintenance_jobs/test_run_queue.py, tests/racing_orchestration/checkpoints/test_checkpoint_queue.py): runs
submitted with their code's origins, and one pass of the coordinator's daemon."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

import dagster as dg
import yaml

from dagster._core.test_utils import create_run_for_test, create_test_daemon_workspace_context
from dagster._core.workspace.load_target import EmptyWorkspaceTarget
from dagster._daemon.run_coordinator.queued_run_coordinator_daemon import QueuedRunCoordinatorDaemon
from tests.conftest import REPO_ROOT, pooled_postgres_storage
from tests.maintenance_jobs.job_origins import job_origins

PROJECT_INSTANCE = yaml.safe_load((REPO_ROOT / "dagster.yaml").read_text())
CONCURRENCY = PROJECT_INSTANCE["concurrency"]


def queued_instance(database_url: str, run_launcher: dict | None = None):
    overrides = {
        "storage": pooled_postgres_storage(database_url),
        "run_coordinator": {
            "module": "dagster._core.run_coordinator",
            "class": "QueuedRunCoordinator",
            # The project's queue settings; launch order = dequeue order, so it can be asserted.
            "config": {**PROJECT_INSTANCE["run_coordinator"]["config"], "dequeue_use_threads": False},
        },
        "concurrency": CONCURRENCY,
    }
    if run_launcher:
        overrides["run_launcher"] = run_launcher
    return dg.instance_for_test(overrides=overrides)


@contextmanager
def mocked_launch_instance(database_url: str) -> Iterator[dg.DagsterInstance]:
    """An emptied queued instance whose launcher records launches and leaves runs STARTING: they stay active, as
    long-running tasks would."""
    launcher = {"module": "dagster._core.test_utils", "class": "MockedRunLauncher"}
    with queued_instance(database_url, launcher) as instance:
        instance.wipe()
        yield instance


def submit(instance: dg.DagsterInstance, job_name: str, tags: dict[str, str]) -> str:
    remote_origin, python_origin = job_origins(job_name)  # submitted runs need their code's origins
    run = create_run_for_test(
        instance,
        job_name=job_name,
        tags=tags,
        status=dg.DagsterRunStatus.NOT_STARTED,
        remote_job_origin=remote_origin,
        job_code_origin=python_origin,
    )
    instance.submit_run(run.run_id, workspace=None)
    return run.run_id


def dequeue(instance: dg.DagsterInstance) -> None:
    with create_test_daemon_workspace_context(EmptyWorkspaceTarget(), instance) as workspace:
        with QueuedRunCoordinatorDaemon(interval_seconds=1) as daemon:
            list(daemon.run_iteration(workspace))
