"""End to end as a user sees it: the `make run` stack, driven through GraphQL, the REST API and a real browser.

One stack for the module, run by `make run`'s own supervisor with its own embedded Postgres (it takes a minute to start
on 2 cores); the last tests stop it as Ctrl-C does, prove that no process is left behind and read the whole session's
console.
"""

import datetime as dt
import os
import re
import shlex
import shutil
import signal
import stat
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from zoneinfo import ZoneInfo

import httpx
import pytest
import sqlalchemy as sa
from dagster_graphql import DagsterGraphQLClient, ReloadRepositoryLocationStatus

from local_stack.stack import StackOptions, free_port, wait_for_http
from tests.conftest import REPO_ROOT
from tests.browser import dismiss_onboarding, goto, launch, load_showing, needs_chromium
from tests.e2e.live_stack import (
    README_COMMAND_SECTIONS,
    SupervisedStack,
    graphql_runs,
    processes_mentioning,
    readme_section,
    run_errors,
    run_log,
    shell_blocks,
    tags_of,
    wait_for,
)

API_KEY = "live-test-key"
ARTIFACTS = REPO_ROOT / "test-artifacts"
# Dense mode: three races a minute apart, the first 16 minutes out, so its T-15 falls due a minute after start.
DENSE_SIM_ARGS = ["--dense-every", "1", "--dense-races", "3", "--dense-lead", "16",
                  "--interim-after", "20", "--final-after", "40"]
# The dense card races in only some (category, country) combinations: the rest stay empty, so the scrape does not
# wait 30 minutes to try them again (tests/racing_orchestration/ingestion covers that retry).
DENSE_CARD_SCRAPE = {"ops": {"scrape_combination": {"config": {"retry_empty": False}}}}

# (code location, page kind, name, a piece of its description) checked in the UI.
DESCRIBED = [
    ("racing_orchestration", "jobs", "morning_scrape", "06:00 scrape of the day"),
    ("racing_orchestration", "sensors", "pre_race_t15_sensor", "Requests pre_race_t15"),
    ("racing_orchestration", "jobs", "cleanup_job_runs", "Run retention: prune old successful runs"),
    ("maintenance_jobs", "sensors", "maintenance_dispatcher", "Every minute: launch each enabled"),
    ("maintenance_jobs", "jobs", "example_executor", "Maintenance task: example_executor."),
]

pytestmark = [pytest.mark.integration, pytest.mark.api, pytest.mark.slow]

REST_HEADERS = {"Authorization": f"Bearer {API_KEY}"}


@pytest.fixture(scope="module")
def stack(tmp_path_factory: pytest.TempPathFactory):
    """`make run`'s supervisor with its own embedded Postgres, on free ports and a folder of its own."""
    data_dir = Path(tempfile.mkdtemp(prefix="live-stack-"))
    options = StackOptions(
        data_dir=data_dir, dagster_port=free_port(), sim_port=free_port(), api_port=free_port(),
        sim_args=DENSE_SIM_ARGS, api_key=API_KEY,
        # The automation sensor's interval, shortened from 5 minutes so the derived data follows within the test.
        extra_env={"RACING_DATA_REFRESH_SECONDS": "30"},
    )
    live = SupervisedStack(options, tmp_path_factory.mktemp("live-stack-console") / "console.txt")
    try:
        live.start()
        yield live
    finally:
        live.stop()
        shutil.rmtree(data_dir, ignore_errors=True)  # its Dagster home, Postgres data and exports


@pytest.fixture(scope="module")
def graphql(stack) -> DagsterGraphQLClient:
    # A reload starts a new code server and answers once it serves: at load ~30 that took over 60 s.
    return DagsterGraphQLClient("127.0.0.1", port_number=stack.options.dagster_port, timeout=180)


@pytest.fixture(scope="module")
def rest_task(stack) -> str:
    """A task created through the REST API, due at the next minute: created first thing (the first test asks for it),
    so its minute passes while the tests before its own run."""
    tz = ZoneInfo(os.environ.get("MAINTENANCE_TIMEZONE", os.environ.get("RACING_TIMEZONE", "Pacific/Auckland")))
    due = (dt.datetime.now(tz) + dt.timedelta(minutes=1)).replace(second=0, microsecond=0)
    task = {
        "task_name": "live_test_task", "service": "e2e", "executor": "example_executor", "priority": 10,
        "minute": due.minute, "hour": due.hour, "day_of_month": due.day, "month": due.month, "day_of_week": -1,
        "config": {"message": "hello from the live test", "delay_seconds": 1},
    }
    created = httpx.post(f"{stack.api_url}/tasks", json=task, headers=REST_HEADERS, timeout=30)
    assert created.status_code in (200, 201), created.text
    return task["task_name"]


@pytest.fixture(scope="module")
def scrape_run_id(stack, graphql) -> str:
    run_id = graphql.submit_job_execution(
        "morning_scrape", repository_location_name="racing_orchestration", repository_name="__repository__",
        run_config=DENSE_CARD_SCRAPE,
    )
    wait_for("morning_scrape to succeed", lambda: graphql.get_run_status(run_id).value in ("SUCCESS", "FAILURE"), 240)
    return run_id


@pytest.mark.usefixtures("rest_task")
def test_graphql_launch_morning_scrape_and_read_its_tags(stack, graphql, scrape_run_id) -> None:
    status = graphql.get_run_status(scrape_run_id).value
    assert status == "SUCCESS", run_errors(stack.dagster_url, scrape_run_id)
    [run] = graphql_runs(stack.dagster_url, {"runIds": [scrape_run_id]})
    tags = tags_of(run)
    assert tags.get("racing/outcome") == "success", (tags, run_log(stack.dagster_url, scrape_run_id))
    assert int(tags["racing/items_processed"]) == 12 and tags["racing/items_failed"] == "0"


def test_racing_audit_reads_the_same_run_storage(stack, scrape_run_id) -> None:
    done = subprocess.run([sys.executable, "-m", "racing_orchestration.cli", "audit", "--json"], env=stack.env,
                          cwd=REPO_ROOT, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    assert scrape_run_id in done.stdout and "morning_scrape" in done.stdout


def test_reload_a_code_location(graphql) -> None:
    info = graphql.reload_repository_location("racing_orchestration")
    assert info.status == ReloadRepositoryLocationStatus.SUCCESS, info


def test_list_runs_filtered_by_tag(stack, scrape_run_id) -> None:
    runs = graphql_runs(stack.dagster_url, {"tags": [{"key": "racing/outcome", "value": "success"}]})
    assert scrape_run_id in {r["runId"] for r in runs}
    assert graphql_runs(stack.dagster_url, {"tags": [{"key": "racing/outcome", "value": "no-such-outcome"}]}) == []


# New Postgres sessions a second on the stack's Dagster database, at most, while its daemon's loops, sensors and runs
# go on. With a connection opened per storage call there were ~30 (the daemon's loops alone ~18 on an idle stack:
# BENCHMARKS.md "Daemon storage"); kept, ~8 remain: each new Dagster instance (a run worker, a sensor evaluation in a
# code server) opens 6-9 at start (its tables checked, its kept connections).
KEPT_CONNECTIONS_MAX_SESSIONS_PER_SECOND = 15.0
KEPT_CONNECTIONS_WINDOW_SECONDS = 30


def test_the_stacks_dagster_processes_keep_their_storage_connections(stack, scrape_run_id) -> None:
    url = stack.env["DAGSTER_POSTGRES_URL"]
    engine = sa.create_engine(url, poolclass=sa.pool.NullPool)

    def sessions() -> int:
        with engine.connect() as conn:
            return int(conn.execute(sa.text("SELECT sessions FROM pg_stat_database WHERE datname = current_database()"))
                       .scalar_one())

    try:
        before, started = sessions(), time.monotonic()
        time.sleep(KEPT_CONNECTIONS_WINDOW_SECONDS)
        opened = sessions() - before - 1  # less the reading's own
        elapsed = time.monotonic() - started
    finally:
        engine.dispose()
    assert opened / elapsed <= KEPT_CONNECTIONS_MAX_SESSIONS_PER_SECOND, f"{opened} new sessions in {elapsed:.0f} s"


def test_sensor_launches_a_pre_race_t15_run_on_its_own(stack, scrape_run_id) -> None:
    def succeeded_t15():
        runs = graphql_runs(stack.dagster_url, {"pipelineName": "pre_race_t15", "statuses": ["SUCCESS"]})
        return [r for r in runs if "dagster/sensor_name" in tags_of(r)]

    [run, *_] = wait_for("a sensor-launched pre_race_t15 run to succeed", succeeded_t15, 300, interval=5)
    tags = tags_of(run)
    assert tags["racing/checkpoint"] == "t15" and tags["racing/race_id"]


ASSET_EVENTS_QUERY = """
query Materializations($key: AssetKeyInput!, $partitions: [String!]) {
  assetOrError(assetKey: $key) {
    __typename
    ... on Asset { assetMaterializations(partitions: $partitions, limit: 50) { runId partition timestamp } }
  }
}
"""


def _materializations(stack, asset: str, partition: str | None = None) -> list[dict]:
    """The asset's materializations (of one partition), newest first, as the UI's asset catalog reads them."""
    variables = {"key": {"path": [asset]}, "partitions": [partition] if partition else None}
    response = httpx.post(f"{stack.dagster_url}/graphql", timeout=30,
                          json={"query": ASSET_EVENTS_QUERY, "variables": variables})
    payload = response.json()["data"]["assetOrError"]
    return payload.get("assetMaterializations", []) if payload["__typename"] == "Asset" else []


def test_the_days_data_is_in_the_catalog_and_the_export_follows_without_a_click(stack, scrape_run_id) -> None:
    import pandas as pd
    import sqlalchemy as sa

    # The dense card's racing day, materialized by the morning scrape run that stored it (tomorrow stays empty).
    [day] = {m["partition"] for m in _materializations(stack, "race_cards") if m["runId"] == scrape_run_id}

    def t15_snapshot():
        return [m for m in _materializations(stack, "odds_t15", day)
                if graphql_runs(stack.dagster_url, {"runIds": [m["runId"]]})[0]["jobName"] == "pre_race_t15"]

    [snapshot, *_] = wait_for("a T-15 snapshot recorded in the catalog by its pre_race_t15 run", t15_snapshot, 300,
                              interval=5)

    def automated_after_the_snapshot(asset: str):
        def probe():
            later = [m for m in _materializations(stack, asset, day)
                     if float(m["timestamp"]) > float(snapshot["timestamp"])]
            runs = graphql_runs(stack.dagster_url, {"runIds": [m["runId"] for m in later]}) if later else []
            return [r for r in runs if tags_of(r).get("dagster/sensor_name") == "race_data_automation"]
        return probe

    for asset in ("race_day_export", "market_movers"):  # nobody clicks: the automation sensor's runs
        wait_for(f"{asset} brought up to date by race_data_automation", automated_after_the_snapshot(asset), 240,
                 interval=5)

    # The export catches up with the race database by itself: its T-15 odds become the database's, row for row.
    path = Path(stack.env["RACING_EXPORT_DIR"]) / "odds" / f"odds_{day}.parquet"
    engine = sa.create_engine(stack.env["RACING_DATABASE_URL"])

    def export_matches_the_database():
        with engine.connect() as conn:
            stored = sorted(tuple(r) for r in conn.execute(sa.text(
                "SELECT o.race_id, o.runner_number, o.fixed_win FROM odds_snapshots o JOIN races r USING (race_id) "
                "JOIN meetings m USING (meeting_id) WHERE m.meeting_date = :d AND o.checkpoint = 't15'"), {"d": day}))
        exported = pd.read_parquet(path) if path.exists() else pd.DataFrame(columns=["checkpoint"])
        t15 = exported[exported["checkpoint"] == "t15"].astype(object).where(lambda f: f.notna(), None)
        rows = sorted(t15[["race_id", "runner_number", "fixed_win"]].itertuples(index=False, name=None))
        seen.update(database=len(stored), exported=len(rows), missing=sorted(set(stored) - set(rows))[:3],
                    extra=sorted(set(rows) - set(stored))[:3])
        return stored and rows == stored

    seen: dict = {}

    try:
        wait_for("the export's T-15 odds to equal the race database's", export_matches_the_database, 240, interval=5)
    except AssertionError as exc:
        raise AssertionError(f"{exc}; last comparison: {seen}") from None
    finally:
        engine.dispose()


@needs_chromium
def test_browser_sees_both_code_locations_and_the_scrape_run(stack, scrape_run_id) -> None:
    from playwright.sync_api import sync_playwright

    ARTIFACTS.mkdir(exist_ok=True)
    dismiss_onboarding(stack.dagster_url)
    with sync_playwright() as p:
        browser = launch(p)
        page = browser.new_page(viewport={"width": 1400, "height": 900})
        goto(page, f"{stack.dagster_url}/runs/{scrape_run_id}")
        # The run's step metadata (the morning scrape's summary) and its outcome tags.
        page.get_by_text("summarize_scrape").first.wait_for(timeout=60_000)
        page.get_by_text("combinations_table").first.wait_for(timeout=60_000)
        page.get_by_role("button", name="View tags and config").click()
        page.get_by_text("racing/outcome: success").first.wait_for(timeout=30_000)
        page.screenshot(path=str(ARTIFACTS / "dagster-morning-scrape-run.png"))
        page.keyboard.press("Escape")

        goto(page, f"{stack.dagster_url}/jobs")
        for name in ("morning_scrape", "pre_race_t60", "pre_race_t15", "post_race_t5", "cleanup_job_runs",
                     "example_executor", "doc_sync_executor", "config_backup_executor"):
            page.get_by_text(name, exact=True).first.wait_for(timeout=60_000)
        page.wait_for_load_state("networkidle")
        page.screenshot(path=str(ARTIFACTS / "dagster-jobs.png"), full_page=True)

        goto(page, f"{stack.dagster_url}/automation")
        for name in ("morning_scrape_schedule", "cleanup_job_runs_schedule", "pre_race_t15_sensor",
                     "post_race_t5_sensor", "maintenance_dispatcher"):
            page.get_by_text(name, exact=True).first.wait_for(timeout=60_000)
        page.wait_for_load_state("networkidle")
        page.screenshot(path=str(ARTIFACTS / "dagster-automation.png"), full_page=True)

        # Each definition's page shows the description written in the code.
        for location, kind, name, description in DESCRIBED:
            goto(page, f"{stack.dagster_url}/locations/__repository__@{location}/{kind}/{name}")
            page.get_by_text(description).first.wait_for(timeout=60_000)

        # The newcomer's view after the walk-through's scrape: the racing asset group shows race_cards materialized
        # with its checks evaluated, and its page shows the day the scrape stored as the latest partition.
        [day] = {m["partition"] for m in _materializations(stack, "race_cards") if m["runId"] == scrape_run_id}
        goto(page, f"{stack.dagster_url}/locations/racing_orchestration/asset-groups/racing")
        node = page.locator("div", has=page.get_by_text("race_cards", exact=True)).filter(
            has_text="Asset checks").last
        node.get_by_text(re.compile(r"\d+ / 3 Passed")).wait_for(timeout=60_000)
        assert "Latest event" in node.inner_text() and re.search(r"\bago\b", node.inner_text()), node.inner_text()
        page.screenshot(path=str(ARTIFACTS / "dagster-racing-asset-group.png"))

        def race_cards_shown() -> None:
            for text, exact in (("Latest materialization", False), (day, True), ("Latest check results", False)):
                page.get_by_text(text, exact=exact).first.wait_for(timeout=60_000)

        load_showing(page, f"{stack.dagster_url}/assets/race_cards", race_cards_shown,
                     ARTIFACTS / "dagster-race-cards.png")

        goto(page, f"{stack.api_url}/docs")
        page.get_by_text("/tasks", exact=False).first.wait_for(timeout=60_000)
        page.screenshot(path=str(ARTIFACTS / "control-api-docs.png"), full_page=True)
        browser.close()


def test_rest_task_due_next_minute_runs_through_the_dispatcher(stack, rest_task: str) -> None:
    assert httpx.get(f"{stack.api_url}/tasks", timeout=30).status_code == 401

    def finished():
        items = httpx.get(f"{stack.api_url}/executions", params={"task_name": rest_task}, headers=REST_HEADERS,
                          timeout=30).json()
        return [i for i in items if i["status"] in ("success", "failed")]

    [execution, *_] = wait_for("the dispatcher to run the task", finished, 240, interval=5)
    assert execution["status"] == "success", execution
    assert execution["triggered_by"] == "scheduler"
    assert execution["dagster_url"].startswith(stack.dagster_url)


@pytest.fixture
def dev_mode_api_port(stack):
    """The control API as `make run` starts it (insecure dev mode, no key) on the stack's databases, beside the
    stack's keyed one: README's curl lines send no key."""
    port = free_port()
    env = {name: value for name, value in stack.env.items() if name != "SCHEDULER_API_KEY"}
    process = subprocess.Popen([sys.executable, "-m", "control_api", "--host", "127.0.0.1", "--port", str(port),
                                "--insecure-dev"], env=env, cwd=REPO_ROOT, start_new_session=True)
    try:
        wait_for_http(f"http://127.0.0.1:{port}/health", 180, process)
        yield port
    finally:
        os.killpg(process.pid, signal.SIGTERM)
        process.wait(timeout=30)


def test_readme_command_blocks_run_as_written_after_source_local_env(stack, dev_mode_api_port, tmp_path) -> None:
    """Every shell block of README's "First ten minutes", "Driving it from outside" and "CLI", extracted from the
    README text, run in a fresh shell whose only preparation is the documented `source .local/env` (this stack's
    file; only the ports differ from `make run`'s)."""
    assert stat.S_IMODE(stack.env_file.stat().st_mode) == 0o600  # database URLs with their passwords
    readme = (REPO_ROOT / "README.md").read_text()
    ports = {"127.0.0.1:3000": f"127.0.0.1:{stack.options.dagster_port}",
             "127.0.0.1:8090": f"127.0.0.1:{dev_mode_api_port}"}
    # A new terminal: the venv's commands on PATH (an activated venv), nothing of the stack's environment.
    shell_env = {"PATH": f"{Path(sys.executable).parent}{os.pathsep}/usr/bin:/bin", "HOME": str(tmp_path),
                 "LANG": "C.UTF-8"}
    for heading in README_COMMAND_SECTIONS:
        for block in shell_blocks(readme_section(readme, heading)):
            script = block
            for readme_port, port in ports.items():
                script = script.replace(readme_port, port)
            done = subprocess.run(["bash", "--noprofile", "--norc", "-e", "-o", "pipefail", "-c",
                                   f"source {shlex.quote(str(stack.env_file))}\n{script}"],
                                  cwd=REPO_ROOT, env=shell_env, capture_output=True, text=True, timeout=900)
            assert done.returncode == 0, (heading, block, done.stdout[-2000:], done.stderr[-3000:])
            assert "Traceback" not in done.stderr and "PythonError" not in done.stdout, (heading, block,
                                                                                        done.stderr[-3000:])


def test_ctrl_c_stops_the_stack_and_leaves_no_process_behind(stack) -> None:
    marker = stack.env["DAGSTER_HOME"]
    assert processes_mentioning(marker), "the stack's processes should be visible before stopping"
    assert stack.stop() == 0, stack.text()[-3000:]
    try:
        wait_for("every stack process to exit", lambda: not processes_mentioning(marker), 30, interval=1)
    except AssertionError:
        pytest.fail(f"processes left behind: {processes_mentioning(marker)}")


# Each was on the console of a fresh `make run` before it was kept off (local_stack/stack.py says how).
CHATTER = [
    "XDG_RUNTIME_DIR",  # platformdirs, when the embedded Postgres' package loads
    "SupersessionWarning",  # `dagster dev` announcing `dg dev`
    "BetaWarning",
    "Found a dagster instance configuration value",  # dagster dev started beside the repository's dagster.yaml
    "Launching Dagster services",  # dagster dev's INFO lines
    "Checking for new runs for sensor",  # the daemon's INFO line per sensor evaluation
    "alembic.runtime.plugins",  # the API reading the registry's revision
    "httpx: HTTP Request",  # the API's GraphQL requests
]


def test_the_console_showed_the_stacks_messages_not_dagsters_chatter(stack) -> None:
    """The whole session's console, from start to Ctrl-C: the banner, the feed, the stop; none of the chatter."""
    text = stack.text()
    assert "Local stack is up" in text and "simulated TAB feed at" in text, text[-3000:]
    assert "Stopping the local stack..." in text, text[-3000:]
    shown = {marker: line for marker in CHATTER for line in text.splitlines() if marker in line}
    assert shown == {}, text[-3000:]
