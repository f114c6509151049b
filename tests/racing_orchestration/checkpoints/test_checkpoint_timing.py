"""The checkpoints' real timing constants, asserted through the real jobs, sensor and Dagster retry machinery.

Nothing here shortens a delay: the post-race job runs with its default 5/5/10-minute chain and the pre-race jobs with
their real RetryPolicy (60 s, linear); the sensor requests with its default 45 s launch-ahead margin and the run waits
for its target. Time is faked instead, at three seams: the runs' `fetch.CLOCK`, the sensors' `sensor_now` and the
clock Dagster's in-process executor waits on between step retries. The expected waits are
written as literal seconds, never read back from the constants under test.
"""

import datetime as dt

import dagster as dg
import pytest
import sqlalchemy as sa

from orchestration_core.run_outcome import TAG_OUTCOME
from racing_orchestration.checkpoints import fetch, sensors
from racing_orchestration.checkpoints.jobs import checkpoint_run_config, post_race_t5, pre_race_t15
from racing_orchestration.race_db.checkpoints import checkpoint_row, claim_checkpoint
from racing_orchestration.race_db.queries import odds_for_race, results_for_race
from racing_orchestration.tab.client import TabClient
from racing_orchestration.tab.sim_engine import SimFeedConfig
from racing_orchestration.tab.sim_feed import SimFeedServer
from tests.racing_orchestration.checkpoint_support import Clock, DagsterRetryClock, RunClock, pick_race, seed_day

DAY = dt.date(2026, 11, 29)
MORNING = dt.datetime(2026, 11, 28, 17, tzinfo=dt.UTC)  # 06:00 in Auckland on the 29th


def _client(server: SimFeedServer) -> TabClient:
    # One attempt per request: every fault reaches the job, so the job's own retry machinery is what is timed.
    return TabClient(base_url=server.base_url, retry_backoff_seconds=0.01, timeout_seconds=5, max_attempts=1)


def _tick(instance: dg.DagsterInstance, race_db, clock: Clock, race_id: str) -> list[dg.RunRequest]:
    """One post-race sensor tick at the clock's time; the requests for `race_id`."""
    with dg.build_sensor_context(instance=instance, resources={"race_db": race_db}) as context:
        result = sensors.post_race_t5_sensor(context)
    return [r for r in getattr(result, "run_requests", None) or [] if r.tags["racing/race_id"] == race_id]


@pytest.mark.integration
def test_post_race_chain_waits_five_five_ten_minutes_then_ends_provisional(pg_instance, race_db, monkeypatch) -> None:
    monkeypatch.delenv("RACING_CHECKPOINT_LAUNCH_AHEAD_SECONDS", raising=False)
    clock = Clock(MORNING)
    monkeypatch.setattr(fetch, "CLOCK", RunClock(clock))
    monkeypatch.setattr(sensors, "sensor_now", clock)
    # The race stays Interim for two hours after its jump: every check of the chain finds it not Final.
    with SimFeedServer(SimFeedConfig(seed=7, final_after_seconds=7200), now=clock).start() as server:
        _, race = pick_race(server.feed.day(DAY))
        seed_day(server.feed, race_db, DAY, countries=("NZ",))
        client = _client(server)

        due = race.scheduled_start + dt.timedelta(seconds=300)  # T+5
        expected_waits = [300, 300, 600]  # seconds after each check's own time: the old system's 5/5/10 minutes
        results, nexts = [], []
        for attempt in range(4):
            # Requested the default 45 s launch-ahead margin before the check is due, not a second sooner.
            clock.now = due - dt.timedelta(seconds=46)
            assert _tick(pg_instance, race_db, clock, race.race_id) == [], f"attempt {attempt} requested early"
            clock.now = due - dt.timedelta(seconds=45)
            [request] = _tick(pg_instance, race_db, clock, race.race_id)
            assert request.tags.get("racing/attempt") == str(attempt)
            assert request.run_key == (f"{race.race_id}:post" if attempt == 0 else f"{race.race_id}:post:{attempt}")
            assert "retry_delays_seconds" not in request.run_config["ops"]["check_race_result"]["config"]
            # The run starts a few seconds after the request and waits for the due instant before it checks; the next
            # wait counts from the check, not from the request.
            clock.advance(seconds=7)
            checked_at = due
            result = post_race_t5.execute_in_process(
                run_config=request.run_config, instance=pg_instance, tags=request.tags,
                resources={"tab_client": client, "race_db": race_db}, raise_on_error=False)
            assert result.success
            results.append(result)
            with race_db.connect() as conn:
                ledger = checkpoint_row(conn, race.race_id, "post")
            if attempt == 3:
                break
            assert (ledger.state, ledger.attempt, ledger.run_id) == ("waiting_final", attempt, result.run_id)
            assert ledger.next_attempt_at == checked_at + dt.timedelta(seconds=expected_waits[attempt])
            nexts.append((ledger.next_attempt_at - checked_at).total_seconds())
            due = ledger.next_attempt_at

    assert nexts == [300, 300, 600]
    assert (ledger.state, ledger.attempt, ledger.run_id) == ("provisional", 3, results[-1].run_id)
    assert "still Interim after 4 checks (300, 300, 600 s apart)" in ledger.note
    run = pg_instance.get_run_by_id(results[-1].run_id)
    assert run.tags[TAG_OUTCOME] == "partial" and run.tags["racing/provisional"] == "true"
    with race_db.connect() as conn:
        stored = results_for_race(conn, race.race_id)
    assert stored and all(r.is_provisional for r in stored)


def _claimed_t15(server: SimFeedServer, race_db, clock: Clock):
    _, race = pick_race(server.feed.day(DAY))
    seed_day(server.feed, race_db, DAY, countries=("NZ",))
    clock.now = race.scheduled_start - dt.timedelta(minutes=15)
    with race_db.begin() as conn:
        claim_checkpoint(conn, race.race_id, "t15", clock.now)
    return race


def _run_t15(race, instance, client, race_db):
    return pre_race_t15.execute_in_process(
        run_config=checkpoint_run_config(race.race_id, "t15", "2026-11-29T00:00:00+00:00"), instance=instance,
        resources={"tab_client": client, "race_db": race_db}, tags={"racing/race_id": race.race_id},
        raise_on_error=False)


@pytest.mark.integration
def test_pre_race_retries_wait_one_then_two_minutes_then_fail_with_a_reason(pg_instance, race_db, monkeypatch) -> None:
    retry_clock = DagsterRetryClock.install(monkeypatch)
    clock = Clock(MORNING)
    with SimFeedServer(SimFeedConfig(seed=7), now=clock).start() as server:
        race = _claimed_t15(server, race_db, clock)
        server.feed.queue_faults("5xx", "5xx", "5xx")
        result = _run_t15(race, pg_instance, _client(server), race_db)

    assert retry_clock.waits == [60, 120]  # the executor's waits before retry 1 and retry 2; none after the third
    retries = [e.event_specific_data.seconds_to_wait for e in result.all_events if e.event_type_value == "STEP_UP_FOR_RETRY"]
    assert retries == [60, 120]
    assert not result.success
    with race_db.connect() as conn:
        ledger = checkpoint_row(conn, race.race_id, "t15")
        assert odds_for_race(conn, race.race_id, "t15") == []
        calls = conn.execute(sa.text("SELECT outcome, status_code FROM scrapes WHERE run_id = :r"),
                             {"r": result.run_id}).all()
    assert (ledger.state, ledger.run_id) == ("failed", result.run_id)
    assert "T-15 fetch failed after 3 attempts" in ledger.note and "HTTP 503" in ledger.note
    assert calls == [("error", 503)] * 3
    run = pg_instance.get_run_by_id(result.run_id)
    assert run.status == dg.DagsterRunStatus.FAILURE
    assert run.tags[TAG_OUTCOME] == "failed" and "after 3 attempts" in run.tags["racing/error"]


@pytest.mark.integration
def test_pre_race_second_retry_after_three_minutes_takes_the_snapshot_once(pg_instance, race_db, monkeypatch) -> None:
    retry_clock = DagsterRetryClock.install(monkeypatch)
    clock = Clock(MORNING)
    with SimFeedServer(SimFeedConfig(seed=7), now=clock).start() as server:
        race = _claimed_t15(server, race_db, clock)
        server.feed.queue_faults("5xx", "429")
        result = _run_t15(race, pg_instance, _client(server), race_db)

    assert retry_clock.waits == [60, 120]
    assert result.success
    with race_db.connect() as conn:
        assert checkpoint_row(conn, race.race_id, "t15").state == "done"
        assert len(odds_for_race(conn, race.race_id, "t15")) == len(race.runners)
