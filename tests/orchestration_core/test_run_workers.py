"""Run workers of a real code server (orchestration_core/dagster_internals.py, `configure_code_server`): forked from a
process that loaded the location once, not a fresh interpreter per run; and a worker that dies while Postgres is down
is still reported, and the server can still stop, once Postgres is back."""

from __future__ import annotations

import os
import re
import signal
import time
from pathlib import Path

import dagster as dg
import pytest

from local_stack.embedded_postgres import temporary_embedded_postgres
from maintenance_jobs.jobs import example_executor_job
from tests.code_server import module_workspace
from tests.conftest import pooled_postgres_storage
from tests.restartable_postgres import RestartablePostgres

pytestmark = pytest.mark.integration

CONFIG = {"ops": {"run_example_executor": {"config": {"message": "forked", "delay_seconds": 0}}}}


def children_of(pid: int) -> dict[int, str]:
    """The live child processes of `pid`: their command lines."""
    found = {}
    for task in Path(f"/proc/{pid}/task").iterdir():
        for child in (task / "children").read_text().split():
            try:
                found[int(child)] = Path(f"/proc/{child}/cmdline").read_bytes().replace(b"\0", b" ").decode()
            except FileNotFoundError:  # exited meanwhile
                pass
    return found


def worker_pid(instance: dg.DagsterInstance, run_id: str) -> int:
    """The run worker's pid, from the engine event Dagster's run worker records first ("Started process for run")."""
    for record in instance.all_logs(run_id, of_type=dg.DagsterEventType.ENGINE_EVENT):
        found = re.match(r"Started process for run \(pid: (\d+)\)", record.dagster_event.message)
        if found:
            return int(found.group(1))
    raise AssertionError(f"no worker pid recorded for run {run_id}")


def launch_example_executor(instance: dg.DagsterInstance, workspace, run_config: dict) -> dg.DagsterRun:
    """A run of the maintenance location's example_executor job, launched through the workspace's code server."""
    request = workspace.create_request_context()
    remote_job = (request.get_code_location("maintenance_jobs").get_repository("__repository__")
                  .get_full_job("example_executor"))
    run = instance.create_run_for_job(example_executor_job, run_config=run_config,
                                      remote_job_origin=remote_job.get_remote_origin(),
                                      job_code_origin=remote_job.get_python_origin())
    instance.launch_run(run.run_id, request)
    return run


def test_each_run_worker_is_forked_from_one_process_that_loaded_the_location(pg_instance: dg.DagsterInstance) -> None:
    with module_workspace(pg_instance, "maintenance_jobs.definitions", "maintenance_jobs") as workspace:
        workers = []
        for _ in range(2):
            run = launch_example_executor(pg_instance, workspace, CONFIG)
            deadline = time.monotonic() + 120
            while not pg_instance.get_run_by_id(run.run_id).is_finished:
                assert time.monotonic() < deadline, "the run did not finish within 120 s"
                time.sleep(0.1)
            assert pg_instance.get_run_by_id(run.run_id).status == dg.DagsterRunStatus.SUCCESS
            workers.append(worker_pid(pg_instance, run.run_id))
        server = workspace._grpc_server_registry._all_processes[0].pid  # noqa: SLF001 - the code server's process
        children = children_of(server)
        # One forkserver, started with the location to preload, served both runs (each in a worker of its own).
        forkservers = [cmd for cmd in children.values() if "multiprocessing.forkserver" in cmd]
        assert len(forkservers) == 1, children
        assert "'maintenance_jobs.definitions'" in forkservers[0], forkservers
        assert len(set(workers)) == 2, workers


# Longer than dagster-postgres gives a new connection (5 retries with backoff: the code server's orphan check raised
# after ~10 s in the experiment that found this), shorter than the 30 s outage of tests/reliability.
OUTAGE_SECONDS = 20


def test_a_worker_that_dies_while_postgres_is_down_is_reported_and_the_server_still_stops() -> None:
    """The fault: the code server's cleanup thread, which reports a dead worker's run as failed and ends the
    server once it was told to shut down, died on the database error of an orphan check during an outage. The run
    stayed STARTED and the server, told to shut down, refused every later run and never exited."""
    slow = {"ops": {"run_example_executor": {"config": {"message": "killed", "delay_seconds": 600}}}}
    with temporary_embedded_postgres("racing-test-pg-") as database_server:
        postgres = RestartablePostgres(database_server)
        storage = pooled_postgres_storage(postgres.url)
        storage["custom"]["config"]["should_autocreate_tables"] = True
        with dg.instance_for_test(overrides={"storage": storage}) as instance, \
                module_workspace(instance, "maintenance_jobs.definitions", "maintenance_jobs") as workspace:
            run = launch_example_executor(instance, workspace, slow)
            deadline = time.monotonic() + 120
            while instance.get_run_by_id(run.run_id).status != dg.DagsterRunStatus.STARTED:
                assert time.monotonic() < deadline, "the run did not start within 120 s"
                time.sleep(0.1)
            worker = worker_pid(instance, run.run_id)

            server = workspace._grpc_server_registry._all_processes[0]  # noqa: SLF001 - the code server
            try:
                postgres.stop()
                os.kill(worker, signal.SIGKILL)
                time.sleep(OUTAGE_SECONDS)
                postgres.start()

                deadline = time.monotonic() + 60
                while not instance.get_run_by_id(run.run_id).is_finished:
                    assert time.monotonic() < deadline, "the dead worker's run was not reported within 60 s"
                    time.sleep(0.5)
                assert instance.get_run_by_id(run.run_id).status == dg.DagsterRunStatus.FAILURE
                messages = [record.dagster_event.message for record in
                            instance.all_logs(run.run_id, of_type=dg.DagsterEventType.ENGINE_EVENT)]
                assert any("was terminated by signal 9 (SIGKILL)" in m for m in messages), messages

                server.create_client().shutdown_server()
                deadline = time.monotonic() + 30
                while server.server_process.poll() is None:
                    assert time.monotonic() < deadline, "the code server did not exit within 30 s of its shutdown"
                    time.sleep(0.5)
            except BaseException:
                server.server_process.kill()  # else module_workspace waits 300 s for a server that never exits
                raise
