"""README's automation examples, run as written (only the port differs): GraphQL from Python (DagsterGraphQLClient:
launch, poll, read tags) and from curl, and `dagster job launch`, against a real webserver and the project's run queue
(dagster.yaml's QueuedRunCoordinator), with Dagster's queue daemon dequeuing onto a real code server, on Postgres,
scraping the simulated feed."""

import contextlib
import io
import json
import os
import re
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import dagster as dg
import pytest

from local_stack.embedded_postgres import drop_database, ensure_database
from racing_orchestration.race_db import upgrade
from racing_orchestration.tab.sim_engine import SimFeedConfig
from racing_orchestration.tab.sim_feed import SimFeedServer
from tests.conftest import REPO_ROOT, serve_webserver

pytestmark = pytest.mark.integration
DAGSTER = str(Path(sys.executable).parent / "dagster")
README = (REPO_ROOT / "README.md").read_text()
FINISHED = (dg.DagsterRunStatus.SUCCESS, dg.DagsterRunStatus.FAILURE, dg.DagsterRunStatus.CANCELED)


def readme_example(name: str) -> str:
    """The code block under README's `<!-- example: name ... -->` marker."""
    match = re.search(rf"<!-- example: {re.escape(name)} .*?-->\n```\w*\n(.*?)```", README, flags=re.DOTALL)
    assert match, f"README has no example {name!r}"
    return match.group(1)


class QueueDaemon:
    """Dagster's own queued-run daemon, iterating every second in a thread as `dagster-daemon run` does; the default
    run launcher starts each dequeued run on the racing location's gRPC code server."""

    def __init__(self, instance: dg.DagsterInstance) -> None:
        self.instance = instance
        self.stop = threading.Event()
        self.error: BaseException | None = None
        self.thread = threading.Thread(target=self._loop, daemon=True)

    def _loop(self) -> None:
        from dagster._core.test_utils import create_test_daemon_workspace_context
        from dagster._core.workspace.load_target import ModuleTarget
        from dagster._daemon.run_coordinator.queued_run_coordinator_daemon import QueuedRunCoordinatorDaemon

        target = ModuleTarget(module_name="racing_orchestration.definitions", attribute=None,
                              working_directory=str(REPO_ROOT), location_name="racing_orchestration")
        try:
            with create_test_daemon_workspace_context(target, self.instance) as workspace:
                with QueuedRunCoordinatorDaemon(interval_seconds=1) as daemon:
                    while not self.stop.wait(1):
                        list(daemon.run_iteration(workspace))
                    deadline = time.monotonic() + 60  # let started runs finish before the code server goes
                    while time.monotonic() < deadline and self.instance.get_runs(
                            dg.RunsFilter(statuses=[dg.DagsterRunStatus.STARTING, dg.DagsterRunStatus.STARTED])):
                        time.sleep(0.5)
        except BaseException as exc:  # surfaced by the test that waits on a run
            self.error = exc


def wait_for_run(instance: dg.DagsterInstance, run_id: str, daemon: QueueDaemon, timeout: float = 180) -> dg.DagsterRun:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        assert daemon.error is None, f"queue daemon failed: {daemon.error!r}"
        run = instance.get_run_by_id(run_id)
        if run is not None and run.status in FINISHED:
            return run
        time.sleep(0.5)
    raise AssertionError(f"run {run_id} did not finish in {timeout:.0f} s")


@pytest.fixture(scope="module")
def stack(postgres_server_url: str, dagster_database_url: str, tmp_path_factory) -> Iterator[dict]:
    """The webserver (racing location, production queue policies), a race database, the simulated feed and a queue
    daemon, with the environment a code server reads."""
    race_db_name = f"readme_{os.getpid()}"
    racing_url = ensure_database(postgres_server_url, race_db_name)
    upgrade(racing_url)
    home = tmp_path_factory.mktemp("dagster_home")
    policies = (REPO_ROOT / "dagster.yaml").read_text().split("run_coordinator:", 1)[1]
    (home / "dagster.yaml").write_text(
        f"storage:\n  postgres:\n    postgres_url: {dagster_database_url}\nrun_coordinator:{policies}")
    with SimFeedServer(SimFeedConfig(seed=7)) as sim, pytest.MonkeyPatch.context() as env:
        values = {"RACING_DATABASE_URL": racing_url, "TAB_API_BASE_URL": sim.base_url, "DAGSTER_HOME": str(home),
                  "DAGSTER_POSTGRES_URL": dagster_database_url,
                  "RACING_EXPORT_DIR": str(tmp_path_factory.mktemp("exports"))}
        for name, value in values.items():
            env.setenv(name, value)
        with dg.DagsterInstance.get() as instance:
            instance.wipe()
            daemon = QueueDaemon(instance)
            with serve_webserver(dagster_database_url, "racing_orchestration.definitions",
                                 "racing_orchestration") as url:
                daemon.thread.start()
                try:
                    path = f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}"  # as in an activated venv
                    yield {"url": url, "port": url.rsplit(":", 1)[1], "instance": instance, "daemon": daemon,
                           "env": {**os.environ, "PATH": path}}
                finally:
                    daemon.stop.set()
                    daemon.thread.join(timeout=120)
    drop_database(postgres_server_url, race_db_name)


def _on_port(text: str, port: str) -> str:
    assert "127.0.0.1:3000" in text or "port_number=3000" in text
    return text.replace("127.0.0.1:3000", f"127.0.0.1:{port}").replace("port_number=3000", f"port_number={port}")


def test_graphql_from_python_launches_polls_and_reads_the_tags(stack) -> None:
    code = _on_port(readme_example("graphql-python"), stack["port"])
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        exec(compile(code, "README.md:graphql-python", "exec"), {})  # noqa: S102 - README's example as written
    [(run_id, status, outcome, processed)] = re.findall(r"^([0-9a-f-]{36}) (\w+) (\w+) (\d+)$", out.getvalue(),
                                                        flags=re.MULTILINE)  # the example's own line
    assert (status, outcome, processed) == ("SUCCESS", "success", "3")  # T, H, G of NZ
    run = stack["instance"].get_run_by_id(run_id)
    assert run.job_name == "morning_scrape" and run.tags["requested_by"] == "notebook"
    assert run.status == dg.DagsterRunStatus.SUCCESS


def test_graphql_from_curl_launches_and_lists_runs_with_tags(stack) -> None:
    launch, listing = _on_port(readme_example("graphql-curl"), stack["port"]).strip().splitlines()
    launched = json.loads(subprocess.run(["bash", "-c", launch], capture_output=True, text=True, check=True,
                                         timeout=60).stdout)
    run_id = launched["data"]["launchRun"]["run"]["runId"]
    run = wait_for_run(stack["instance"], run_id, stack["daemon"])
    assert run.status == dg.DagsterRunStatus.SUCCESS
    listed = json.loads(subprocess.run(["bash", "-c", listing], capture_output=True, text=True, check=True,
                                       timeout=60).stdout)
    runs = {r["runId"]: r for r in listed["data"]["runsOrError"]["results"]}
    assert runs[run_id]["status"] == "SUCCESS"
    assert {"key": "racing/outcome", "value": "success"} in runs[run_id]["tags"]


def test_dagster_job_launch_queues_a_run_the_daemon_starts(stack) -> None:
    command = readme_example("dagster-job-launch").strip()
    before = {r.run_id for r in stack["instance"].get_runs()}
    done = subprocess.run(["bash", "-c", command], cwd=REPO_ROOT, env=stack["env"], capture_output=True, text=True,
                          timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    [run] = [r for r in stack["instance"].get_runs(dg.RunsFilter(job_name="morning_scrape")) if r.run_id not in before]
    finished = wait_for_run(stack["instance"], run.run_id, stack["daemon"])
    assert finished.status == dg.DagsterRunStatus.SUCCESS
    assert finished.tags["racing/outcome"] == "success" and finished.tags["orchestration/kind"] == "racing"
    assert finished.tags["racing/items_processed"] == "12"  # today and tomorrow, T/H/G x NZ/AUS: the defaults
    # It recorded the cards of both days in the asset catalog.
    partitions = {r.asset_materialization.partition for r in stack["instance"].fetch_materializations(
        dg.AssetKey("race_cards"), limit=50).records if r.run_id == run.run_id}
    assert len(partitions) == 2
