"""What starting a run's worker costs a code server, by hand (BENCHMARKS.md "Run worker start").

    .venv/bin/python bench/run_worker_start.py [--rounds 3] [--runs 8]

A local deployment (`make run`, the default run launcher) runs each run in a worker process that Dagster's gRPC code
server starts. Dagster starts it with `spawn`: a fresh interpreter that imports Dagster and the code location again
for every run (Dagster has no setting for it, and the project does not replace it). This serves the maintenance
location from a real code server and launches the shipped example_executor job `--runs` times through it, one run
after the other, the way the daemon launches them.
Per round and case it reads the CPU time (user + system) of the code server and everything it started, from its start
to its exit, and the wall time from each launch to the run's end. A server that launches no run is measured too, so
the CPU a run adds is (CPU with runs - CPU without) / runs, set beside what loading the location costs a server.
Rounds interleave the two; medians, side by side in one run, so the ratio holds on a loaded host. A temporary DAGSTER_HOME with Dagster's default (SQLite) storage.
"""

from __future__ import annotations

import argparse
import ctypes
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

import dagster as dg
from dagster._core.workspace.context import WorkspaceProcessContext
from dagster._core.workspace.load_target import ModuleTarget

REPO_ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO_ROOT))
LOCATION = "maintenance_jobs"
CONFIG = {"ops": {"run_example_executor": {"config": {"message": "benchmark", "delay_seconds": 0}}}}
CASES = {"spawned (Dagster's default, shipped)": "maintenance_jobs.definitions"}


PR_SET_CHILD_SUBREAPER = 36


def reap_orphans(timeout: float = 60) -> None:
    """Wait for the descendants the code server left behind (run workers end just after it) and reap them, so
    their CPU counts: this process is their subreaper (main)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            pid, _ = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            time.sleep(0.05)
    raise AssertionError(f"a process the code server started was still running {timeout} s after it exited")


def children_cpu() -> float:
    times = os.times()
    return times.children_user + times.children_system


def serve(instance: dg.DagsterInstance, module: str, runs: int) -> tuple[float, list[float]]:
    """(CPU seconds of the code server's whole life, wall seconds of each run from launch to its end)."""
    from maintenance_jobs.jobs import example_executor_job

    before = children_cpu()
    walls = []
    target = ModuleTarget(module_name=module, attribute=None, working_directory=str(REPO_ROOT),
                          location_name=LOCATION)
    with WorkspaceProcessContext(instance, target) as workspace:
        remote_job = (workspace.create_request_context().get_code_location(LOCATION)
                      .get_repository("__repository__").get_full_job("example_executor"))
        for _ in range(runs):
            started = time.monotonic()
            run = instance.create_run_for_job(
                example_executor_job, run_config=CONFIG, remote_job_origin=remote_job.get_remote_origin(),
                job_code_origin=remote_job.get_python_origin())
            instance.submit_run(run.run_id, workspace.create_request_context())
            deadline = time.monotonic() + 300
            while not instance.get_run_by_id(run.run_id).is_finished:
                assert time.monotonic() < deadline, f"run {run.run_id} did not finish within 300 s"
                time.sleep(0.05)
            walls.append(time.monotonic() - started)
            status = instance.get_run_by_id(run.run_id).status
            assert status == dg.DagsterRunStatus.SUCCESS, (module, status)
        registry = workspace._grpc_server_registry  # noqa: SLF001 - wait for the server to exit, so it is reaped
        registry.shutdown_all_processes()
        for process in registry._all_processes:  # noqa: SLF001
            process.wait(timeout=300)
    reap_orphans()
    return children_cpu() - before, walls


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--runs", type=int, default=8)
    args = parser.parse_args()
    # The run workers outlive the code server by a moment; orphaned, they would be
    # reaped by init and their CPU lost to this measurement. As their subreaper this process reaps them itself.
    assert ctypes.CDLL(None, use_errno=True).prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) == 0
    with tempfile.TemporaryDirectory(prefix="run-worker-bench-") as scratch:
        home = Path(scratch)
        # Launched as it is submitted (Dagster's default coordinator queues it for a daemon this does not run).
        (home / "dagster.yaml").write_text("telemetry:\n  enabled: false\nrun_coordinator:\n"
                                           "  module: dagster._core.run_coordinator\n  class: DefaultRunCoordinator\n")
        os.environ["DAGSTER_HOME"] = str(home)
        os.environ["PYTHONPATH"] = os.pathsep.join([str(home), str(REPO_ROOT), os.environ.get("PYTHONPATH", "")])
        os.environ["PYTHONWARNINGS"] = "ignore"
        sys.path.insert(0, str(home))
        idle: list[float] = []
        results: dict[str, list[tuple[float, list[float]]]] = {name: [] for name in CASES}
        with dg.DagsterInstance.get() as instance:
            for _ in range(args.rounds):  # interleaved: a load change hits every case alike
                idle.append(serve(instance, CASES[next(iter(CASES))], 0)[0])
                for name, module in CASES.items():
                    results[name].append(serve(instance, module, args.runs))
    idle_cpu = statistics.median(idle)
    print(f"{args.rounds} rounds of {args.runs} runs each, medians; Python {sys.version.split()[0]}, "
          f"{os.cpu_count()} cores, load average {os.getloadavg()[0]:.1f}\n")
    print(f"a code server that launches no run: {idle_cpu:.2f} CPU-s\n")
    print(f"| run workers | code server CPU, {args.runs} runs | CPU a run adds | wall per run |\n|---|---|---|---|")
    added = {}
    for name, samples in results.items():
        total = statistics.median(cpu for cpu, _ in samples)
        added[name] = (total - idle_cpu) / args.runs
        wall = statistics.median(w for _, walls in samples for w in walls)
        print(f"| {name} | {total:.2f} s | {added[name]:.2f} s | {wall:.2f} s |")
    shipped = added[next(iter(CASES))]
    print(f"\nCPU a run adds / a location's load in a code server that launches no run: {shipped / idle_cpu:.2f}x")


if __name__ == "__main__":
    main()
