"""Run workers of a real code server: forked from a process that loaded the location once
(orchestration_core/dagster_internals.py, `start_run_workers_preloaded`), not a fresh interpreter per run."""

from __future__ import annotations

import re
import time
from pathlib import Path

import dagster as dg
import pytest

from maintenance_jobs.jobs import example_executor_job
from tests.code_server import module_workspace

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


def test_each_run_worker_is_forked_from_one_process_that_loaded_the_location(pg_instance: dg.DagsterInstance) -> None:
    with module_workspace(pg_instance, "maintenance_jobs.definitions", "maintenance_jobs") as workspace:
        request = workspace.create_request_context()
        remote_job = (request.get_code_location("maintenance_jobs").get_repository("__repository__")
                      .get_full_job("example_executor"))
        workers = []
        for _ in range(2):
            run = pg_instance.create_run_for_job(
                example_executor_job, run_config=CONFIG, remote_job_origin=remote_job.get_remote_origin(),
                job_code_origin=remote_job.get_python_origin())
            pg_instance.launch_run(run.run_id, request)
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
