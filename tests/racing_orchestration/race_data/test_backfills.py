"""Backfills of race_cards: a range of past days in one run, with the morning scrape's steps, retries, outcome tags
and idempotent upserts, each stored day materialized with its own counts and each day TAB no longer serves ending
with its reason. Through the asset (in process), the dagster CLI (`--partition-range`, as README shows it) and the
UI's backfill dialog (GraphQL launchPartitionBackfill, then Dagster's own backfill daemon), on Postgres."""

import datetime as dt
import importlib
import logging
import os
import subprocess
import sys
from pathlib import Path
from zoneinfo import ZoneInfo

import dagster as dg
import pandas as pd
import pytest
import sqlalchemy as sa

from racing_orchestration.ingestion.race_cards import race_cards
from racing_orchestration.tab.client import TabClient
from racing_orchestration.tab.sim_engine import SimFeedConfig
from racing_orchestration.tab.sim_feed import SimFeedServer
from tests.conftest import REPO_ROOT, pooled_postgres_storage

DAGSTER = str(Path(sys.executable).parent / "dagster")
RACE_CARDS = dg.AssetKey("race_cards")
HISTORY_DAYS = 31
RANGE_TAGS = ("dagster/asset_partition_range_start", "dagster/asset_partition_range_end")


def _today() -> dt.date:
    return dt.datetime.now(ZoneInfo("Pacific/Auckland")).date()


def _history_feed_and_three_days() -> tuple[SimFeedServer, list[dt.date]]:
    """A feed keeping HISTORY_DAYS of history, and three consecutive past days, the first older than that. The feed's
    clock stays at the moment the days were picked: a test running across the racing midnight would otherwise see the
    feed's history window move under its days (seen at 23:58 NZDT: a day refused on one side only)."""
    moment = dt.datetime.now(dt.UTC)
    first = moment.astimezone(ZoneInfo("Pacific/Auckland")).date() - dt.timedelta(days=HISTORY_DAYS + 1)
    feed = SimFeedServer(SimFeedConfig(seed=7, history_days=HISTORY_DAYS), now=lambda: moment)
    return feed, [first + dt.timedelta(days=n) for n in range(3)]


def _card_records(instance: dg.DagsterInstance) -> dict[str, dg.EventLogRecord]:
    records = instance.fetch_materializations(RACE_CARDS, limit=100).records
    return {r.asset_materialization.partition: r for r in records}


def _check_status(instance: dg.DagsterInstance, name: str, partition: str) -> str:
    key = dg.AssetCheckKey(RACE_CARDS, name)
    [latest, *_] = [r for r in instance.event_log_storage.get_asset_check_execution_history(key, limit=50)
                    if r.partition == partition]
    return latest.status.value


def _stored_races(race_db, day: dt.date) -> int:
    with race_db.connect() as conn:
        return conn.execute(sa.text("SELECT count(*) FROM races JOIN meetings USING (meeting_id) "
                                    "WHERE meeting_date = :d"), {"d": day}).scalar()


def _stored_meetings(race_db, day: dt.date) -> int:
    with race_db.connect() as conn:
        return conn.execute(sa.text("SELECT count(*) FROM meetings WHERE meeting_date = :d"), {"d": day}).scalar()


@pytest.mark.integration
def test_a_range_with_a_day_tab_no_longer_serves(pg_instance, race_db) -> None:
    feed, (gone, first, second) = _history_feed_and_three_days()
    config = {"ops": {"race_cards": {"config": {"countries": ["NZ"], "retry_delay_seconds": 0.05}}}}
    with feed.start() as server:
        client = TabClient(base_url=server.base_url, retry_backoff_seconds=0.01, timeout_seconds=5)
        result = dg.materialize([race_cards], instance=pg_instance, run_config=config, raise_on_error=False,
                                resources={"tab_client": client, "race_db": race_db},
                                tags=dict(zip(RANGE_TAGS, (gone.isoformat(), second.isoformat()), strict=True)))
        requests = server.stats()["requests"]["/meetings"]
    assert not result.success
    [failure] = [e for e in result.all_events if e.event_type_value == "STEP_FAILURE"]
    message = failure.step_failure_data.user_failure_data.description
    assert message.startswith("1 of 3 racing day(s) stored nothing")
    assert f"{gone}: TAB no longer serves this day: 3 of 3 combinations were refused" in message
    assert "HTTP 404" in message
    assert requests == 9  # 3 days x 3 categories, each once: the refused past day is not retried
    assert not [e for e in result.all_events if e.event_type_value == "STEP_UP_FOR_RETRY"]

    records = _card_records(pg_instance)
    assert set(records) == {first.isoformat(), second.isoformat()}
    for day in (first, second):
        record = records[day.isoformat()]
        assert record.run_id == result.run_id
        assert record.asset_materialization.metadata["meetings"].value == _stored_meetings(race_db, day) > 0
        assert _check_status(pg_instance, "card_not_empty", day.isoformat()) == "SUCCEEDED"
    assert _check_status(pg_instance, "card_not_empty", gone.isoformat()) == "FAILED"
    tags = pg_instance.get_run_by_id(result.run_id).tags
    assert (tags["racing/outcome"], tags["racing/items_processed"], tags["racing/items_failed"]) == \
        ("partial", "2", "1")
    assert "TAB no longer serves" in tags["racing/error"]


@pytest.mark.integration
def test_re_storing_a_day_is_idempotent(pg_instance, race_db, tab_client) -> None:
    day = _today() - dt.timedelta(days=5)
    config = {"ops": {"race_cards": {"config": {"countries": ["NZ"]}}}}
    runs = [dg.materialize([race_cards], partition_key=day.isoformat(), instance=pg_instance, run_config=config,
                           resources={"tab_client": tab_client, "race_db": race_db}) for _ in range(2)]
    assert all(run.success for run in runs)
    with race_db.connect() as conn:
        counts = conn.execute(sa.text("SELECT (SELECT count(*) FROM meetings), (SELECT count(*) FROM races)")).one()
    assert counts[0] == _stored_meetings(race_db, day) and counts[1] > 0
    records = pg_instance.fetch_materializations(RACE_CARDS, limit=10).records
    assert sorted(r.run_id for r in records) == sorted(run.run_id for run in runs)


@pytest.fixture
def cli_env(tmp_path, monkeypatch, dagster_database_url, racing_db_url, sim_feed, pg_instance) -> dict[str, str]:
    home = tmp_path / "dagster_home"
    home.mkdir()
    (home / "dagster.yaml").write_text((REPO_ROOT / "dagster.yaml").read_text())
    env = {"DAGSTER_HOME": str(home), "DAGSTER_POSTGRES_URL": dagster_database_url,
           "RACING_DATABASE_URL": racing_db_url, "TAB_API_BASE_URL": sim_feed.base_url,
           "RACING_EXPORT_DIR": str(tmp_path / "exports")}
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    return {**os.environ, **env}


@pytest.mark.integration
def test_three_day_backfill_of_cards_and_export_from_the_cli(cli_env, race_db) -> None:
    days = [_today() - dt.timedelta(days=n) for n in (4, 3, 2)]
    span = f"{days[0]}...{days[-1]}"
    # The README's command, as a user types it.
    done = subprocess.run([DAGSTER, "asset", "materialize", "-m", "racing_orchestration", "--select", "race_cards",
                           "--partition-range", span], env=cli_env, cwd=REPO_ROOT, capture_output=True, text=True,
                          timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    with dg.DagsterInstance.from_config(cli_env["DAGSTER_HOME"]) as instance:
        [run] = instance.get_runs(dg.RunsFilter(tags={RANGE_TAGS[0]: days[0].isoformat()}))
        assert run.status == dg.DagsterRunStatus.SUCCESS
        assert (run.tags[RANGE_TAGS[0]], run.tags[RANGE_TAGS[1]]) == (days[0].isoformat(), days[-1].isoformat())
        assert run.tags["racing/outcome"] == "success" and run.tags["racing/items_processed"] == "3"
        records = _card_records(instance)
        assert set(records) == {d.isoformat() for d in days}
        assert {r.run_id for r in records.values()} == {run.run_id}
        metas = {p: r.asset_materialization.metadata["meetings"].value for p, r in records.items()}
    assert metas == {d.isoformat(): _stored_meetings(race_db, d) for d in days}
    assert all(metas.values())

    # Then re-export the same days, README's second backfill command.
    done = subprocess.run([DAGSTER, "asset", "materialize", "-m", "racing_orchestration", "--select",
                           "race_day_export", "--partition-range", span], env=cli_env, cwd=REPO_ROOT,
                          capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    exports = Path(cli_env["RACING_EXPORT_DIR"])
    for day in days:
        races = pd.read_parquet(exports / "races" / f"races_{day}.parquet")
        assert set(races["meeting_date"]) == {day} and len(races) == _stored_races(race_db, day) > 0
        assert all((exports / table / f"{table}_{day}.parquet").is_file()
                   for table in ("meetings", "races", "runners", "odds", "results", "dividends"))


@pytest.mark.integration
def test_backfill_from_the_ui_dialog_runs_through_the_backfill_daemon(dagster_database_url, racing_db_url, race_db,
                                                                      monkeypatch) -> None:
    from dagster._core.test_utils import create_test_daemon_workspace_context
    from dagster._core.workspace.load_target import ModuleTarget
    from dagster._daemon.backfill import execute_backfill_iteration
    from dagster_graphql.client.query import LAUNCH_PARTITION_BACKFILL_MUTATION
    from dagster_graphql.test.utils import execute_dagster_graphql

    feed, (gone, first, second) = _history_feed_and_three_days()
    with feed.start() as server:
        monkeypatch.setenv("RACING_DATABASE_URL", racing_db_url)
        monkeypatch.setenv("TAB_API_BASE_URL", server.base_url)
        # The run executes in this process (synchronous launcher), from the definitions module: bind its resources
        # to this test's feed, as a code server started now would.
        definitions = importlib.reload(importlib.import_module("racing_orchestration.definitions"))
        try:
            overrides = {"storage": pooled_postgres_storage(dagster_database_url)}
            with dg.instance_for_test(overrides=overrides, synchronous_run_launcher=True,
                                      synchronous_run_coordinator=True) as instance:
                instance.wipe()
                target = ModuleTarget(module_name="racing_orchestration.definitions", attribute=None,
                                      working_directory=str(REPO_ROOT), location_name="racing_orchestration")
                with create_test_daemon_workspace_context(workspace_load_target=target, instance=instance) as workspace:
                    # What the dialog sends for race_cards and three partitions (countries narrowed to keep it short).
                    params = {"assetSelection": [{"path": ["race_cards"]}],
                              "partitionNames": [d.isoformat() for d in (gone, first, second)],
                              "runConfigData": {"ops": {"race_cards": {"config": {"countries": ["NZ"],
                                                                                  "retry_delay_seconds": 0.05}}}}}
                    launched = execute_dagster_graphql(workspace.create_request_context(),
                                                       LAUNCH_PARTITION_BACKFILL_MUTATION, {"backfillParams": params})
                    assert launched.data["launchPartitionBackfill"]["__typename"] == "LaunchBackfillSuccess", launched
                    backfill_id = launched.data["launchPartitionBackfill"]["backfillId"]
                    for _ in range(3):  # request the run (executed synchronously here), then see it finished
                        list(execute_backfill_iteration(workspace, logging.getLogger("backfill-test")))
                    backfill = instance.get_backfill(backfill_id)
                    [run] = instance.get_runs(dg.RunsFilter(tags={"dagster/backfill": backfill_id}))
                    assert run.status == dg.DagsterRunStatus.FAILURE  # one run for the range (single_run policy)
                    assert run.tags[RANGE_TAGS[0]] == gone.isoformat() and run.tags[RANGE_TAGS[1]] == second.isoformat()
                    assert backfill.status.value in ("COMPLETED_FAILED", "FAILED"), backfill.status
                    assert set(_card_records(instance)) == {first.isoformat(), second.isoformat()}
                    assert "TAB no longer serves" in run.tags["racing/error"]
                    assert run.tags["racing/outcome"] == "partial"
        finally:
            monkeypatch.undo()
            importlib.reload(definitions)  # back to the environment the other tests see
