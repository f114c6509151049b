"""The card checks follow the data they judge: a checkpoint run that stores a race's runners records the day's card
checks again, so `races_have_runners` does not stay red for runners that are in the database. On a real Dagster
instance on Postgres, the simulated feed on a socket, the checkpoint run's clock driven by the test."""

import datetime as dt
import threading

import dagster as dg
import pytest
import sqlalchemy as sa

from racing_orchestration.checkpoints import fetch
from racing_orchestration.checkpoints.jobs import build_checkpoint_jobs, checkpoint_run_config
from racing_orchestration.checkpoints.racing_day import racing_day
from racing_orchestration.ingestion.jobs import morning_scrape
from racing_orchestration.race_data.card_checks import record_card_checks
from racing_orchestration.race_data.recorded_checks import verify_day
from racing_orchestration.race_db.checkpoints import claim_checkpoint
from racing_orchestration.race_db.store import upsert_event
from racing_orchestration.tab.client import TabClient
from racing_orchestration.tab.sim_engine import SimFeedConfig
from racing_orchestration.tab.sim_feed import SimFeedServer
from tests.racing_orchestration.checkpoint_support import Clock, RunClock, fetch_event, seed_day

pytestmark = pytest.mark.integration

DAY = dt.date(2026, 11, 29)
TZ = "Pacific/Auckland"
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


def test_recorded_checks_match_the_data_until_a_race_starts_without_its_t60(pg_instance, race_db,
                                                                            monkeypatch) -> None:
    clock = Clock(dt.datetime(2026, 11, 28, 12, tzinfo=dt.UTC))
    monkeypatch.setattr(fetch, "CLOCK", RunClock(clock))
    with SimFeedServer(SimFeedConfig(seed=7), now=clock).start() as server:
        client = _scrape(pg_instance, server, race_db)
        first, second = _first_races(server, 2)
        clock.now = first.scheduled_start - dt.timedelta(minutes=60)
        _t60(pg_instance, client, race_db, first)

    # At the first race's T-60 every recorded card check is what the data says; racing_day has nothing recorded yet.
    verified = verify_day(pg_instance, race_db.engine(), DAY, clock.now, TZ)
    assert (verified.checked, verified.mismatches) == (3, ())
    assert verified.unrecorded == ("racing_day:pre_race_snapshots_complete", "racing_day:results_complete")
    # The second race reaches its T-60 (requested, not run): awaiting it is no failure, nothing to record again.
    with race_db.begin() as conn:
        claim_checkpoint(conn, second.race_id, "t60", second.scheduled_start - dt.timedelta(minutes=60))
    at_t60 = second.scheduled_start - dt.timedelta(minutes=60)
    assert verify_day(pg_instance, race_db.engine(), DAY, at_t60, TZ).mismatches == ()
    # It starts without a T-60 run: its runners are due and missing, and no run recorded the check since.
    verified = verify_day(pg_instance, race_db.engine(), DAY, second.scheduled_start, TZ)
    assert [m.to_json() for m in verified.mismatches] == [
        {"check": "race_cards:races_have_runners", "partition": DAY.isoformat(), "recorded": "passed",
         "now": "failed"}]
    assert verified.to_json() == {"day": DAY.isoformat(), "checked": 3,
                                  "mismatches": [m.to_json() for m in verified.mismatches]}


class SlowEventLog:
    """A run's context whose event log write takes as long as the test says (`release`): what a run finishing
    together with another looks like when its write is slow."""

    def __init__(self, name: str, recorded: list, release: threading.Event | None = None) -> None:
        self.name, self.recorded, self.release = name, recorded, release
        self.writing = threading.Event()

    def log_event(self, event) -> None:
        self.writing.set()
        if self.release is not None:
            assert self.release.wait(30)
        self.recorded.append((self.name, event))


def test_runs_recording_the_same_day_take_turns_so_the_last_record_read_the_latest_data(race_db) -> None:
    clock = Clock(dt.datetime(2026, 11, 28, 12, tzinfo=dt.UTC))
    with SimFeedServer(SimFeedConfig(seed=7), now=clock).start() as server:
        seed_day(server.feed, race_db, DAY, countries=("NZ",))
        first, _ = _first_races(server, 2)
        event = fetch_event(server.feed, first.race_id)
    at = first.scheduled_start - dt.timedelta(minutes=59)
    with race_db.begin() as conn:  # its T-60 ended without runners: the check fails
        claim_checkpoint(conn, first.race_id, "t60", at, state="failed")
    recorded: list = []
    release = threading.Event()
    slow = SlowEventLog("stale", recorded, release)
    stale = threading.Thread(target=record_card_checks, args=(slow, race_db, DAY, at, TZ))
    stale.start()
    assert slow.writing.wait(30)  # read the day (no runners), now writing its evaluations
    with race_db.begin() as conn:  # a later run stores the race's runners and records the day
        upsert_event(conn, event)
    fresh = threading.Thread(target=record_card_checks, args=(SlowEventLog("fresh", recorded), race_db, DAY, at, TZ))
    fresh.start()
    fresh.join(1.0)  # without the day's lock it would read and record within this second, before the stale write
    release.set()
    stale.join(30)
    fresh.join(30)
    runners = [(name, e.passed) for name, e in recorded if e.check_name == "races_have_runners"]
    assert runners == [("stale", False), ("fresh", True)]


def test_a_t60_run_that_fails_records_the_days_check_too(pg_instance, race_db, monkeypatch) -> None:
    clock = Clock(dt.datetime(2026, 11, 28, 12, tzinfo=dt.UTC))
    monkeypatch.setattr(fetch, "CLOCK", RunClock(clock))
    with SimFeedServer(SimFeedConfig(seed=7), now=clock).start() as server:
        client = _scrape(pg_instance, server, race_db)
        [first] = _first_races(server, 1)
        clock.now = first.scheduled_start + dt.timedelta(minutes=3)  # the run comes after the jump: no odds stored
        with race_db.begin() as conn:
            claim_checkpoint(conn, first.race_id, "t60", first.scheduled_start - dt.timedelta(minutes=60))
        config = checkpoint_run_config(first.race_id, "t60",
                                       (first.scheduled_start - dt.timedelta(minutes=60)).isoformat())
        run = JOBS["t60"].execute_in_process(run_config=config, instance=pg_instance,
                                             resources={"tab_client": client, "race_db": race_db},
                                             tags={"racing/race_id": first.race_id}, raise_on_error=False)
    assert not run.success
    # It ended its ledger row `skipped` and kept the event it fetched (with the runners): the day is judged again.
    latest = latest_recorded(pg_instance, RUNNERS, DAY.isoformat())
    assert (latest.run_id, latest.status.value) == (run.run_id, "SUCCEEDED")
    assert verify_day(pg_instance, race_db.engine(), DAY, clock.now, TZ).mismatches == ()


def test_racing_day_checks_are_compared_under_the_day_they_judged(pg_instance, race_db, tab_client) -> None:
    config = {"ops": {"plan_scrape_combinations": {"config": {"dates": [DAY.isoformat()], "countries": ["NZ"],
                                                              "categories": ["T"]}},
                      "scrape_combination": {"config": {"max_retries": 0}}}}
    assert morning_scrape.execute_in_process(run_config=config, instance=pg_instance,
                                             resources={"tab_client": tab_client, "race_db": race_db}).success
    assert dg.materialize([racing_day], partition_key=DAY.isoformat(), instance=pg_instance,
                          resources={"race_db": race_db}).success
    now = dt.datetime.now(dt.UTC)  # the racing_day asset judges at the sensors' clock, the real one here
    verified = verify_day(pg_instance, race_db.engine(), DAY, now, TZ)
    assert (verified.checked, verified.unrecorded, verified.mismatches) == (5, (), ())
    # Every race's T-60 and T-15 explained in the ledger afterwards (skipped with a reason), with no run recording
    # racing_day again: its recorded pre-race failure no longer holds.
    with race_db.begin() as conn:
        ids = conn.execute(sa.text("SELECT race_id FROM races")).scalars().all()
        for race_id in ids:
            for checkpoint in ("t60", "t15"):
                claim_checkpoint(conn, race_id, checkpoint, now, state="skipped", note="daemon down")
    verified = verify_day(pg_instance, race_db.engine(), DAY, now, TZ)
    assert [m.to_json() for m in verified.mismatches] == [
        {"check": "racing_day:pre_race_snapshots_complete", "partition": DAY.isoformat(), "recorded": "failed",
         "now": "passed"}]
