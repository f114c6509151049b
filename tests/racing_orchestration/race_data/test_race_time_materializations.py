"""Each race-time run records a materialization of the race's racing day with what it stored: the T-60 and T-15
snapshots (odds_t60 / odds_t15) and every post-race attempt (race_results, Final or not), on a real Dagster instance
on Postgres, against the simulated feed on a socket."""

import datetime as dt

import dagster as dg
import pytest

from racing_orchestration.checkpoints.jobs import build_checkpoint_jobs, checkpoint_run_config
from racing_orchestration.race_data.catalog import ODDS_T15, ODDS_T60, RACE_RESULTS
from racing_orchestration.race_db.checkpoints import claim_checkpoint
from racing_orchestration.tab.client import TabClient
from racing_orchestration.tab.sim_engine import SimFeedConfig
from racing_orchestration.tab.sim_feed import SimFeedServer
from tests.racing_orchestration.checkpoint_support import Clock, pick_race, seed_day

DAY = dt.date(2026, 11, 29)
JOBS = build_checkpoint_jobs(dg.RetryPolicy(max_retries=2, delay=0.05))


def _run(checkpoint: str, race_id: str, instance, server: SimFeedServer, race_db, **config):
    run_config = checkpoint_run_config(race_id, checkpoint)
    op = next(iter(run_config["ops"]))
    run_config["ops"][op]["config"].update(config)
    client = TabClient(base_url=server.base_url, retry_backoff_seconds=0.01, timeout_seconds=5)
    return JOBS[checkpoint].execute_in_process(run_config=run_config, instance=instance,
                                               resources={"tab_client": client, "race_db": race_db},
                                               tags={"racing/race_id": race_id}, raise_on_error=False)


def _materializations(instance: dg.DagsterInstance, key: dg.AssetKey) -> list[dg.EventLogRecord]:
    return list(instance.fetch_materializations(key, limit=100).records)


@pytest.mark.integration
@pytest.mark.parametrize(("checkpoint", "key", "minutes_before"), [("t60", ODDS_T60, 60), ("t15", ODDS_T15, 15)])
def test_a_pre_race_snapshot_materializes_odds_of_the_races_day(checkpoint, key, minutes_before, pg_instance,
                                                                  race_db) -> None:
    clock = Clock(dt.datetime(2026, 11, 28, 17, tzinfo=dt.UTC))
    with SimFeedServer(SimFeedConfig(seed=7), now=clock).start() as server:
        seed_day(server.feed, race_db, DAY, countries=("NZ",))
        meeting, race = pick_race(server.feed.day(DAY))
        with race_db.begin() as conn:
            claim_checkpoint(conn, race.race_id, checkpoint, race.scheduled_start)
        clock.now = race.scheduled_start - dt.timedelta(minutes=minutes_before)
        result = _run(checkpoint, race.race_id, pg_instance, server, race_db)
    assert result.success
    [record] = _materializations(pg_instance, key)
    materialization = record.asset_materialization
    assert record.run_id == result.run_id and materialization.partition == DAY.isoformat()
    meta = {k: v.value for k, v in materialization.metadata.items()}
    runners = len(race.runners)
    assert meta["race_id"] == race.race_id and meta["meeting"] == meeting.name and meta["race_number"] == race.number
    assert meta["runners"] == meta["snapshot_rows"] == meta["snapshot_rows_written"] == runners
    assert meta["abandoned"] is False and meta["status"] == "Open"
    assert f"race {race.number} at {meeting.name}" in materialization.description
    other = ODDS_T15 if key == ODDS_T60 else ODDS_T60
    assert _materializations(pg_instance, other) == [] and _materializations(pg_instance, RACE_RESULTS) == []


@pytest.mark.integration
def test_every_post_race_attempt_materializes_results_with_whether_final(pg_instance, race_db) -> None:
    clock = Clock(dt.datetime(2026, 11, 28, 17, tzinfo=dt.UTC))
    with SimFeedServer(SimFeedConfig(seed=7, interim_after_seconds=60, final_after_seconds=600),
                       now=clock).start() as server:
        seed_day(server.feed, race_db, DAY, countries=("NZ",))
        _, race = pick_race(server.feed.day(DAY))
        with race_db.begin() as conn:
            claim_checkpoint(conn, race.race_id, "post", race.jump() + dt.timedelta(minutes=5))
        clock.now = race.jump() + dt.timedelta(minutes=5)  # Interim
        interim = _run("post", race.race_id, pg_instance, server, race_db, attempt=0)
        clock.now = race.jump() + dt.timedelta(minutes=11)  # Final
        final = _run("post", race.race_id, pg_instance, server, race_db, attempt=1)
    assert interim.success and final.success
    records = sorted(_materializations(pg_instance, RACE_RESULTS), key=lambda r: r.storage_id)
    assert [r.run_id for r in records] == [interim.run_id, final.run_id]
    first, second = ({k: v.value for k, v in r.asset_materialization.metadata.items()} for r in records)
    assert (first["status"], first["final"], first["attempt"]) == ("Interim", False, 0)
    assert (second["status"], second["final"], second["attempt"]) == ("Final", True, 1)
    assert second["results"] == len(race.finish_order) and second["final_dividends"] > 0
    assert all(r.asset_materialization.partition == DAY.isoformat() for r in records)
    assert "provisional results" in records[0].asset_materialization.description
    assert "Final results" in records[1].asset_materialization.description


@pytest.mark.integration
def test_a_failed_fetch_records_no_materialization(pg_instance, race_db) -> None:
    clock = Clock(dt.datetime(2026, 11, 28, 17, tzinfo=dt.UTC))
    with SimFeedServer(SimFeedConfig(seed=7), now=clock).start() as server:
        seed_day(server.feed, race_db, DAY, countries=("NZ",))
        _, race = pick_race(server.feed.day(DAY))
        clock.now = race.scheduled_start - dt.timedelta(minutes=60)
        server.feed.queue_faults(*["5xx"] * 9)  # 3 attempts x 3 client tries
        result = _run("t60", race.race_id, pg_instance, server, race_db)
    assert not result.success
    assert _materializations(pg_instance, ODDS_T60) == []


@pytest.mark.integration
def test_an_unreadable_race_database_costs_the_catalog_event_not_the_run() -> None:
    from racing_orchestration.checkpoints.jobs import _record_stored
    from racing_orchestration.race_db.resource import RaceDatabase

    unreachable = RaceDatabase(url="postgresql+psycopg2://nobody@127.0.0.1:9/none")
    with dg.build_op_context() as context:
        _record_stored(context, unreachable, ODDS_T60, "R1", "T-60 odds snapshot", {})  # logs, does not raise
        assert context.get_events() == []
