"""`racing check` and `racing scrape` queue their run through a real Dagster webserver (GraphQL launchRun) when a
daemon serves the run queue, tagged so the one-run-per-race limit applies; without a daemon they say what to do."""

import time
from collections.abc import Iterator
from pathlib import Path

import dagster as dg
import pytest

from racing_orchestration.cli import main as racing_main
from racing_orchestration.cli.launch import queue_served
from tests.conftest import REPO_ROOT, serve_webserver


@pytest.fixture(scope="module")
def racing_webserver_url(dagster_database_url: str) -> Iterator[str]:
    """A webserver serving the racing location (as workspace.yaml names it) on the session's storage.

    Its code server validates a launch's resource config, which reads RACING_DATABASE_URL; the queued runs are
    never executed here, so the database it names is never opened."""
    with pytest.MonkeyPatch.context() as env:
        env.setenv("RACING_DATABASE_URL", "postgresql+psycopg2://unused@127.0.0.1:9/never_opened")
        with serve_webserver(dagster_database_url, "racing_orchestration.definitions", "racing_orchestration") as url:
            yield url


@pytest.fixture
def dagster_home(tmp_path: Path, dagster_database_url: str, pg_instance: dg.DagsterInstance, monkeypatch) -> Path:
    """DAGSTER_HOME with the project's queue policies (dagster.yaml) on the test storage (set after `pg_instance`,
    whose test instance points DAGSTER_HOME at its own folder)."""
    home = tmp_path / "dagster_home"
    home.mkdir()
    policies = (REPO_ROOT / "dagster.yaml").read_text().split("run_coordinator:", 1)[1]
    (home / "dagster.yaml").write_text(
        f"storage:\n  postgres:\n    postgres_url: {dagster_database_url}\nrun_coordinator:{policies}")
    monkeypatch.setenv("DAGSTER_HOME", str(home))
    return home


def _heartbeat(instance: dg.DagsterInstance, age_seconds: float) -> None:
    from dagster._daemon.types import DaemonHeartbeat

    instance.add_daemon_heartbeat(DaemonHeartbeat(time.time() - age_seconds, "QUEUED_RUN_COORDINATOR", None, None))


@pytest.mark.unit
@pytest.mark.parametrize(
    ("heartbeats", "served"),
    [
        ({}, False),
        ({"SENSOR": 999.0}, False),  # another daemon's beat does not dequeue runs
        ({"QUEUED_RUN_COORDINATOR": 910.0}, True),  # 90 s old: the daemon still counts as serving the queue
        ({"QUEUED_RUN_COORDINATOR": 909.0}, False),
    ],
)
def test_queue_served_by_a_recent_queue_daemon_heartbeat(heartbeats, served) -> None:
    assert queue_served(heartbeats, 1000.0) is served


@pytest.mark.integration
def test_check_queues_the_run_with_the_race_tag(racing_webserver_url, dagster_home, pg_instance, monkeypatch,
                                                capsys) -> None:
    monkeypatch.setenv("DAGSTER_UI_URL", racing_webserver_url)
    _heartbeat(pg_instance, 5)
    code = racing_main(["check", "R123", "--checkpoint", "t15", "--detach"])
    out, err = capsys.readouterr()
    assert code == 0, err
    [run] = pg_instance.get_runs(dg.RunsFilter(job_name="pre_race_t15"))
    assert run.status == dg.DagsterRunStatus.QUEUED  # waits for the daemon, behind any run of the same race
    assert run.tags["racing/race_id"] == "R123" and run.tags["racing/triggered_by"] == "manual"
    assert run.tags["orchestration/kind"] == "racing"  # the job's tags come along, as for the sensor's runs
    assert run.run_config["ops"]["take_odds_snapshot"]["config"] == {"race_id": "R123", "checkpoint": "t15",
                                                                     "scheduled_for": ""}
    assert f"{racing_webserver_url}/runs/{run.run_id}" in out
    # The queue policy of the instance the CLI serves (the project's dagster.yaml): one run per race tag value.
    with dg.DagsterInstance.get() as cli_instance:
        cli_limits = cli_instance.get_concurrency_config().run_queue_config.tag_concurrency_limits
    assert {"key": "racing/race_id", "value": {"applyLimitPerUniqueValue": True}, "limit": 1} in cli_limits


@pytest.mark.integration
def test_scrape_queues_a_validated_run(racing_webserver_url, dagster_home, pg_instance, monkeypatch, capsys) -> None:
    monkeypatch.setenv("DAGSTER_UI_URL", racing_webserver_url)
    _heartbeat(pg_instance, 5)
    code = racing_main(["scrape", "--date", "2026-11-29", "--countries", "NZ", "--detach"])
    assert code == 0, capsys.readouterr().err
    [run] = pg_instance.get_runs(dg.RunsFilter(job_name="morning_scrape"))
    assert run.status == dg.DagsterRunStatus.QUEUED and run.tags["racing/triggered_by"] == "manual"
    plan = run.run_config["ops"]["plan_scrape_combinations"]["config"]
    assert plan == {"dates": ["2026-11-29"], "countries": ["NZ"]}
    assert run.run_config["ops"]["scrape_combination"]["config"] == {"max_retries": 0}


@pytest.mark.integration
@pytest.mark.parametrize("age", [None, 120.0])
def test_without_a_daemon_nothing_is_queued_and_the_message_says_what_to_do(age, racing_webserver_url, dagster_home,
                                                                            pg_instance, monkeypatch, capsys) -> None:
    monkeypatch.setenv("DAGSTER_UI_URL", racing_webserver_url)
    if age is not None:
        _heartbeat(pg_instance, age)
    assert racing_main(["check", "R123", "--checkpoint", "t60"]) == 2
    err = capsys.readouterr().err
    assert "no Dagster daemon is serving the run queue" in err and "--in-process" in err
    assert ("never sent a heartbeat" in err) if age is None else ("last heartbeat was" in err)
    assert pg_instance.get_runs() == []


@pytest.mark.integration
def test_an_unreachable_webserver_is_reported(dagster_home, pg_instance, monkeypatch, capsys) -> None:
    from local_stack.stack import free_port

    monkeypatch.setenv("DAGSTER_UI_URL", f"http://127.0.0.1:{free_port()}")
    _heartbeat(pg_instance, 5)
    assert racing_main(["check", "R123", "--checkpoint", "t60"]) == 2
    err = capsys.readouterr().err
    assert "unreachable" in err and "DAGSTER_UI_URL" in err and "--in-process" in err
    assert pg_instance.get_runs() == []


@pytest.mark.integration
def test_a_launch_the_code_location_refuses_is_reported_with_its_reason(dagster_database_url, dagster_home,
                                                                        pg_instance, monkeypatch, capsys) -> None:
    """A webserver whose racing location is not the one the CLI expects (here it serves only the maintenance
    location): Dagster answers that the job does not exist, and the CLI says so."""
    with serve_webserver(dagster_database_url, "maintenance_jobs.definitions", "maintenance_jobs") as url:
        monkeypatch.setenv("DAGSTER_UI_URL", url)
        _heartbeat(pg_instance, 5)
        assert racing_main(["check", "R123", "--checkpoint", "t60"]) == 2
    err = capsys.readouterr().err
    assert "refused the run" in err and "racing_orchestration" in err
    assert pg_instance.get_runs() == []


def test_a_run_without_the_race_database_setting_fails_naming_it(monkeypatch) -> None:
    # The race database is built in the run worker from RACING_DATABASE_URL (run config cannot give it): a worker
    # without the variable fails the run at its start, naming it.
    from orchestration_core.run_config_rules import MissingSetting
    from racing_orchestration.resources import deployment_race_database

    monkeypatch.delenv("RACING_DATABASE_URL", raising=False)
    with pytest.raises(MissingSetting, match="RACING_DATABASE_URL is not set"):
        deployment_race_database()


def command_while(instance: dg.DagsterInstance, argv: list[str], job_name: str, once_queued) -> int:
    """`racing <argv>`, with `once_queued(run)` called from another thread once its run of `job_name` is QUEUED
    (however long the launch takes: with no daemon here, the command waits until the action ends its wait).

    QUEUED, not merely created: a run canceled before the webserver enqueues it turns QUEUED again (the enqueue
    event overwrites the status), and the command would wait for ever."""
    import threading

    done = threading.Event()

    def watch() -> None:
        while not done.is_set():
            runs = instance.get_runs(dg.RunsFilter(job_name=job_name, statuses=[dg.DagsterRunStatus.QUEUED]))
            if runs:
                once_queued(runs[0])
                return
            time.sleep(0.05)

    watcher = threading.Thread(target=watch, daemon=True)
    watcher.start()
    try:
        return racing_main(argv)
    finally:
        done.set()
        watcher.join()


@pytest.mark.integration
def test_check_waits_for_the_queued_run_and_reports_its_end(racing_webserver_url, dagster_home, pg_instance,
                                                            monkeypatch, capsys) -> None:
    """Without --detach the command follows the run until it ends: here an operator cancels it while it is queued."""
    monkeypatch.setenv("DAGSTER_UI_URL", racing_webserver_url)
    monkeypatch.setattr("racing_orchestration.cli.launch.POLL_SECONDS", 0.05)
    _heartbeat(pg_instance, 5)

    code = command_while(pg_instance, ["check", "R9", "--checkpoint", "t60"], "pre_race_t60",
                         pg_instance.report_run_canceled)
    out, err = capsys.readouterr()
    [run] = pg_instance.get_runs(dg.RunsFilter(job_name="pre_race_t60"))
    assert run.status == dg.DagsterRunStatus.CANCELED
    assert code == 2 and f"run {run.run_id}: canceled" in out and "racing check: failed" in err


@pytest.mark.integration
@pytest.mark.parametrize(("argv", "job_name"), [
    (["check", "R9", "--checkpoint", "t60"], "pre_race_t60"),
    (["scrape", "--date", "2026-11-29", "--countries", "NZ"], "morning_scrape"),
], ids=["check", "scrape"])
def test_a_daemon_that_stops_while_the_command_waits_leaves_the_run_queued_and_says_so(
        racing_webserver_url, dagster_home, pg_instance, monkeypatch, capsys, argv, job_name) -> None:
    """The queue daemon beat when the run was submitted, then stopped: the command returns (exit 3) instead of waiting
    for ever, and the run stays queued for the daemon's return."""
    monkeypatch.setenv("DAGSTER_UI_URL", racing_webserver_url)
    monkeypatch.setattr("racing_orchestration.cli.launch.POLL_SECONDS", 0.05)
    monkeypatch.setattr("racing_orchestration.cli.launch.STALL_CHECK_SECONDS", 0.2)
    _heartbeat(pg_instance, 5)

    code = command_while(pg_instance, argv, job_name, lambda _run: pg_instance.wipe_daemon_heartbeats())
    out, err = capsys.readouterr()
    [run] = pg_instance.get_runs(dg.RunsFilter(job_name=job_name))
    assert code == 3
    assert run.status == dg.DagsterRunStatus.QUEUED  # nothing lost: it starts when a daemon is back
    assert f"run {run.run_id} is still queued" in err and "no heartbeat is recorded" in err
    assert f"/runs/{run.run_id}" in err and "failed" not in err
