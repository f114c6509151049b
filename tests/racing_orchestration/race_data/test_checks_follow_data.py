"""The card checks follow the data they judge: a checkpoint run that stores a race's runners records the day's card
checks again, so `races_have_runners` does not stay red for runners that are in the database. On a real Dagster
instance on Postgres, the simulated feed on a socket, the checkpoint run's clock driven by the test."""

import datetime as dt

import dagster as dg
import pytest

from racing_orchestration.checkpoints import fetch
from racing_orchestration.checkpoints.jobs import build_checkpoint_jobs, checkpoint_run_config
from racing_orchestration.ingestion.jobs import morning_scrape
from racing_orchestration.race_db.checkpoints import claim_checkpoint
from racing_orchestration.tab.client import TabClient
from racing_orchestration.tab.sim_engine import SimFeedConfig
from racing_orchestration.tab.sim_feed import SimFeedServer
from tests.racing_orchestration.checkpoint_support import Clock, RunClock

pytestmark = pytest.mark.integration

DAY = dt.date(2026, 11, 29)
RUNNERS = dg.AssetCheckKey(dg.AssetKey("race_cards"), "races_have_runners")
JOBS = build_checkpoint_jobs(dg.RetryPolicy(max_retries=2, delay=0.05))


def latest_recorded(instance: dg.DagsterInstance, key: dg.AssetCheckKey, partition: str):
    """The newest evaluation of `key` recorded for `partition` (read straight from the event log, oldest ids last)."""
    for record in instance.event_log_storage.get_asset_check_execution_history(key, limit=100):
        if record.partition == partition and record.status.value in ("SUCCEEDED", "FAILED"):
            return record
    return None


def _first_races(server: SimFeedServer, count: int):
    races = sorted((race for meeting in server.feed.day(DAY) if meeting.country == "NZ" and meeting.category == "T"
                    for race in meeting.races if race.abandoned_at is None),
                   key=lambda race: (race.scheduled_start, race.race_id))
    return races[:count]


def _scrape(instance, server, race_db):
    config = {"ops": {"plan_scrape_combinations": {"config": {"dates": [DAY.isoformat()], "countries": ["NZ"],
                                                              "categories": ["T"]}},
                      "scrape_combination": {"config": {"max_retries": 0}}}}
    client = TabClient(base_url=server.base_url, retry_backoff_seconds=0.01, timeout_seconds=5)
    result = morning_scrape.execute_in_process(run_config=config, instance=instance,
                                               resources={"tab_client": client, "race_db": race_db})
    assert result.success
    return client


def _t60(instance, client, race_db, race):
    with race_db.begin() as conn:  # the T-60 sensor's claim
        claim_checkpoint(conn, race.race_id, "t60", race.scheduled_start - dt.timedelta(minutes=60))
    config = checkpoint_run_config(race.race_id, "t60", (race.scheduled_start - dt.timedelta(minutes=60)).isoformat())
    result = JOBS["t60"].execute_in_process(run_config=config, instance=instance,
                                            resources={"tab_client": client, "race_db": race_db},
                                            tags={"racing/race_id": race.race_id}, raise_on_error=False)
    assert result.success
    return result


def test_a_t60_run_that_stores_runners_records_the_days_runners_check_again(pg_instance, race_db,
                                                                          monkeypatch) -> None:
    clock = Clock(dt.datetime(2026, 11, 28, 12, tzinfo=dt.UTC))
    monkeypatch.setattr(fetch, "CLOCK", RunClock(clock))
    with SimFeedServer(SimFeedConfig(seed=7), now=clock).start() as server:
        client = _scrape(pg_instance, server, race_db)
        # The scrape ran after the day was raced (real time): no race has runners yet, the check says so.
        scraped = latest_recorded(pg_instance, RUNNERS, DAY.isoformat())
        assert scraped is not None and scraped.status.value == "FAILED"

        [first] = _first_races(server, 1)
        clock.now = first.scheduled_start - dt.timedelta(minutes=60)  # the first race reaches its T-60
        run = _t60(pg_instance, client, race_db, first)

    latest = latest_recorded(pg_instance, RUNNERS, DAY.isoformat())
    # The runners are in the database now: the day's check is recorded again by the run that stored them.
    assert (latest.run_id, latest.status.value) == (run.run_id, "SUCCEEDED")
    evaluation = latest.event.dagster_event.event_specific_data
    assert evaluation.description == f"{DAY}: all 1 races past T-60 have runners"
