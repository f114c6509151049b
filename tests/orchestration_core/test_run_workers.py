"""Run workers of a real code server, the local stack's run launcher (Dagster's default): a worker that dies while
Postgres is down still ends its run, by the run's max runtime."""

from __future__ import annotations

import logging
import os
import re
import signal
import time

import dagster as dg
import pytest
from dagster._daemon.monitoring.run_monitoring import monitor_started_run

from local_stack.embedded_postgres import temporary_embedded_postgres
from maintenance_jobs.jobs import example_executor_job
from tests.code_server import module_workspace
from tests.conftest import pooled_postgres_storage
from tests.restartable_postgres import RestartablePostgres

pytestmark = pytest.mark.integration



def worker_pid(instance: dg.DagsterInstance, run_id: str) -> int:
    """The run worker's pid, from the engine event Dagster's run worker records first ("Started process for run")."""
    for record in instance.all_logs(run_id, of_type=dg.DagsterEventType.ENGINE_EVENT):
        found = re.match(r"Started process for run \(pid: (\d+)\)", record.dagster_event.message)
        if found:
            return int(found.group(1))
    raise AssertionError(f"no worker pid recorded for run {run_id}")


def launch_example_executor(instance: dg.DagsterInstance, workspace, run_config: dict,
                            tags: dict[str, str] | None = None) -> dg.DagsterRun:
    """A run of the maintenance location's example_executor job, launched through the workspace's code server."""
    request = workspace.create_request_context()
    remote_job = (request.get_code_location("maintenance_jobs").get_repository("__repository__")
                  .get_full_job("example_executor"))
    run = instance.create_run_for_job(example_executor_job, run_config=run_config, tags=tags,
                                      remote_job_origin=remote_job.get_remote_origin(),
                                      job_code_origin=remote_job.get_python_origin())
    instance.launch_run(run.run_id, request)
    return run


# Longer than dagster-postgres gives a new connection (5 retries with backoff: the code server's orphan check raised
# after ~10 s in the experiment that found this), shorter than the 30 s outage of tests/reliability.
OUTAGE_SECONDS = 20


# The run's own limit (Dagster's `dagster/max_runtime`, as checkpoint and maintenance runs carry): run monitoring ends
# the run once it has passed.
MAX_RUNTIME_SECONDS = 45


def test_a_worker_that_dies_while_postgres_is_down_ends_its_run_at_its_max_runtime() -> None:
    """The fault: the code server's cleanup thread, which reports a dead worker's run as failed, dies on the database
    error of its check during an outage (Dagster's; no setting changes it, and production's run launchers start no
    worker in the code server). The run's own max runtime still ends it, through run monitoring, which every instance
    of this project enables. The server is left unable to start runs once that cancel reaches it (it waits on the
    dead worker): the local stack restarts its code servers after an outage (tests/local_stack/
    test_code_server_watch.py)."""
    slow = {"ops": {"run_example_executor": {"config": {"message": "killed", "delay_seconds": 600}}}}
    with temporary_embedded_postgres("racing-test-pg-") as database_server:
        postgres = RestartablePostgres(database_server)
        storage = pooled_postgres_storage(postgres.url)
        storage["custom"]["config"]["should_autocreate_tables"] = True
        overrides = {"storage": storage, "run_monitoring": {"enabled": True, "poll_interval_seconds": 1}}
        with dg.instance_for_test(overrides=overrides) as instance, \
                module_workspace(instance, "maintenance_jobs.definitions", "maintenance_jobs") as workspace:
            server = workspace._grpc_server_registry._all_processes[0]  # noqa: SLF001 - the code server
            try:
                run = launch_example_executor(instance, workspace, slow,
                                              tags={"dagster/max_runtime": str(MAX_RUNTIME_SECONDS)})
                deadline = time.monotonic() + 120
                while instance.get_run_by_id(run.run_id).status != dg.DagsterRunStatus.STARTED:
                    assert time.monotonic() < deadline, "the run did not start within 120 s"
                    time.sleep(0.1)
                worker = worker_pid(instance, run.run_id)

                postgres.stop()
                os.kill(worker, signal.SIGKILL)
                time.sleep(OUTAGE_SECONDS)
                postgres.start()

                deadline = time.monotonic() + MAX_RUNTIME_SECONDS + 60
                while not instance.get_run_by_id(run.run_id).is_finished:
                    assert time.monotonic() < deadline, "the dead worker's run did not end within its max runtime"
                    [record] = instance.get_run_records(dg.RunsFilter(run_ids=[run.run_id]))
                    monitor_started_run(instance, workspace.create_request_context(), record, logging.getLogger())
                    time.sleep(1)
                assert instance.get_run_by_id(run.run_id).status == dg.DagsterRunStatus.FAILURE
                messages = [record.dagster_event.message for record in instance.all_logs(run.run_id)
                            if record.dagster_event is not None]
                assert any(f"Canceling due to exceeding maximum runtime of {MAX_RUNTIME_SECONDS} seconds" in (m or "")
                           for m in messages), messages[-6:]

            finally:
                # Told to shut down, a server whose cleanup thread died never exits (local_stack ends its process
                # group instead); module_workspace would wait for it.
                server.server_process.kill()
