"""Launch ahead, fetch on time: the sensor requests a checkpoint ahead of its target and the run waits for the target
(re-reading the race's start time) before calling TAB, never before it; a late run fetches at once, flagged.

The run's clock is `fetch.CLOCK`, replaced here by a fake one whose `sleep` moves time; the simulated feed (on a real
socket) runs on the same fake time and records the fake time at which it served each request.
Real Postgres, real job execution (`execute_in_process` against `pg_instance`).
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable

import dagster as dg
import pytest
import sqlalchemy as sa

from racing_orchestration.checkpoints import fetch, sensors
from racing_orchestration.checkpoints.jobs import DEFAULT_MAX_WAIT_SECONDS, build_checkpoint_jobs, checkpoint_run_config
from racing_orchestration.checkpoints.windows import (
    CHECKPOINTS,
    GRACE,
    WAIT_SLACK,
    Action,
    Wait,
    claim_base_key,
    holding_key,
    decide,
    fetch_target,
    plan_wait,
    rescheduled_key,
)
from racing_orchestration.race_db.checkpoints import checkpoint_row, claim_checkpoint, update_checkpoint
from racing_orchestration.settings import RacingSettings, launch_ahead
from racing_orchestration.tab.client import TabClient
from racing_orchestration.tab.sim_engine import SimFeedConfig
from racing_orchestration.tab.sim_feed import SimFeedServer
from tests.host_timezone import host_timezone
from tests.racing_orchestration.checkpoint_support import Clock, RunClock, pick_race, seed_day

T60, T15, POST = CHECKPOINTS["t60"], CHECKPOINTS["t15"], CHECKPOINTS["post"]
START = dt.datetime(2026, 11, 29, 1, 0, tzinfo=dt.UTC)
DAY = dt.date(2026, 11, 29)
AHEAD = dt.timedelta(seconds=45)
S = dt.timedelta(seconds=1)


# --- pure timing ---------------------------------------------------------------------------------------------------

@pytest.mark.unit
@pytest.mark.parametrize(
    ("target_after_now", "waited", "moved_later", "action", "seconds"),
    [
        (0, 0, False, Wait.FETCH, 0),  # exactly at the target: fetch
        (-7, 0, False, Wait.FETCH, 7),  # started after it: fetch at once, 7 s late
        (0.001, 0, False, Wait.SLEEP, 0.001),  # a millisecond early is early
        (30, 0, False, Wait.SLEEP, 30),
        (30, 0, True, Wait.SLEEP, 30),  # moved, still within the margin: wait longer
        (30, 40, True, Wait.RESCHEDULE, 30),  # moved: 40 s waited + 30 s to go > 55 s
        (30, 25, True, Wait.SLEEP, 30),  # moved: 25 s waited + 30 s to go is the 55 s bound itself: wait
        (600, 0, True, Wait.RESCHEDULE, 600),  # moved 10 minutes: give the worker back
        (600, 0, False, Wait.SLEEP, 600),  # not moved (a clock difference): wait, never fetch early
    ],
)
def test_plan_wait(target_after_now, waited, moved_later, action, seconds) -> None:
    now = START
    target = now + dt.timedelta(seconds=target_after_now)
    requested = target - S if moved_later else target
    plan = plan_wait(target, now, dt.timedelta(seconds=waited), AHEAD + WAIT_SLACK, requested)
    assert (plan.action, plan.seconds) == (action, pytest.approx(seconds))


@pytest.mark.unit
def test_fetch_target_follows_the_start_except_for_follow_up_attempts() -> None:
    requested = START - dt.timedelta(minutes=15)
    moved = START + dt.timedelta(minutes=4)
    assert fetch_target(T15, requested, START) == requested
    assert fetch_target(T15, requested, moved) == moved - dt.timedelta(minutes=15)
    assert fetch_target(POST, START + dt.timedelta(minutes=5), moved) == moved + dt.timedelta(minutes=5)
    chain = START + dt.timedelta(minutes=11, seconds=3)  # the ledger's next_attempt_at: from the previous attempt
    assert fetch_target(POST, chain, moved, attempt=1) == chain
    assert fetch_target(T15, requested, None) == requested  # race unknown: the request stands


@pytest.mark.unit
@pytest.mark.parametrize(
    ("spec", "seconds_after_due", "action"),
    [
        (T15, -46, Action.WAIT),
        (T15, -45, Action.REQUEST),  # the margin before the target: requested, on time
        (T15, 0, Action.REQUEST),
        (POST, -45, Action.REQUEST),
        (T60, 121, Action.REQUEST_LATE),  # the grace still counts from the target
    ],
)
def test_decide_requests_within_the_margin_before_the_target(spec, seconds_after_due, action) -> None:
    now = START + spec.offset + dt.timedelta(seconds=seconds_after_due)
    assert decide(spec, START, "Open", now, ahead=AHEAD).action == action


@pytest.mark.unit
def test_run_keys_of_a_rescheduled_claim_and_its_retries() -> None:
    key = rescheduled_key("r1", T15, dt.datetime(2026, 11, 29, 1, 5, tzinfo=dt.UTC))
    assert key == "r1:t15:at20261129T010500Z"
    # the key names the UTC instant, whatever the target's zone and the host's
    auckland = dt.timezone(dt.timedelta(hours=13))
    with host_timezone("Pacific/Auckland"):
        assert rescheduled_key("r1", T15, dt.datetime(2026, 11, 29, 14, 5, tzinfo=auckland)) == key
    assert claim_base_key(None, "r1:t15") == "r1:t15"
    # Keys as stored by earlier ticks (run storage, the ledger), written out: not rebuilt with retry_key.
    assert claim_base_key("r1:t15:retry2", "r1:t15") == "r1:t15"
    assert claim_base_key("r1:t15:at20261129T010500Z:retry1", "r1:t15") == key
    assert claim_base_key(key, "r1:t15") == key  # a rescheduled claim not yet re-requested counts from its own key
    assert claim_base_key("r1:post:2:retry1", "r1:post:2") == "r1:post:2"


@pytest.mark.unit
@pytest.mark.parametrize(("latest_key", "checkpoint", "attempt", "holder"), [
    (None, "t15", 0, "r1:t15"),  # the first claim: the ledger keeps no key
    ("r1:t15:retry1", "t15", 0, "r1:t15:retry1"),  # re-requested
    ("r1:t60:at20261129T010500Z", "t60", 0, "r1:t60:at20261129T010500Z"),  # rescheduled
    (None, "post", 2, "r1:post:2"),  # the post-race chain's attempt 2
])
def test_the_key_a_claimed_checkpoint_is_requested_under(latest_key, checkpoint, attempt, holder) -> None:
    assert holding_key(latest_key, "r1", CHECKPOINTS[checkpoint], attempt) == holder


@pytest.mark.unit
def test_launch_ahead_setting(monkeypatch) -> None:
    monkeypatch.delenv("RACING_CHECKPOINT_LAUNCH_AHEAD_SECONDS", raising=False)
    assert launch_ahead() == dt.timedelta(seconds=45)  # the local default (README "Checkpoint timing")
    monkeypatch.setenv("RACING_CHECKPOINT_LAUNCH_AHEAD_SECONDS", "60")
    assert launch_ahead() == dt.timedelta(seconds=60)
    monkeypatch.setenv("RACING_CHECKPOINT_LAUNCH_AHEAD_SECONDS", "600")  # would overlap the race's next checkpoint
    with pytest.raises(ValueError, match="180"):
        RacingSettings()


# --- real job execution on a fake clock ----------------------------------------------------------------------------

class FakeClock(Clock):
    """fetch.CLOCK's replacement: `sleep` moves time by `fraction` of what was asked (a sleep may wake early) and
    runs the hooks a test gives it (e.g. the start time moving while the run waits)."""

    def __init__(self, now: dt.datetime, fraction: float = 1.0) -> None:
        super().__init__(now)
        self.fraction = fraction
        self.sleeps: list[float] = []
        self.on_sleep: list[Callable[[], None]] = []

    def sleep(self, seconds: float) -> None:
        assert seconds > 0
        self.sleeps.append(seconds)
        self.advance(seconds=seconds * self.fraction if seconds > 0.01 else seconds)
        for hook in self.on_sleep:
            hook()


class FeedTime:
    """The simulated feed's clock: the fake time, recording each moment the feed asked for it (it asks while serving a
    request), so a test sees when TAB was called in the run's time."""

    def __init__(self, clock: FakeClock) -> None:
        self.clock, self.seen = clock, []

    def __call__(self) -> dt.datetime:
        self.seen.append(self.clock.now)
        return self.clock.now


class Feed:
    """The simulated feed as a run sees it: /events requests and the fake times they were served at."""

    def __init__(self, server: SimFeedServer, time: FeedTime) -> None:
        self.server, self.time = server, time

    def reset(self) -> None:
        self.server.feed.reset_stats()
        self.time.seen.clear()

    def events_sent(self) -> list[dt.datetime]:
        """One entry per /events request since the last call: the fake time it was served at."""
        seen = sorted(set(self.time.seen))
        calls = self.server.feed.stats()["requests"]  # (asks the time too)
        self.reset()
        assert set(calls) <= {"/events/{id}"}, calls
        count = calls.get("/events/{id}", 0)
        assert len(seen) <= 1 or count > 1, seen
        return seen * count if len(seen) == 1 else seen


JOBS = build_checkpoint_jobs(dg.RetryPolicy(max_retries=2, delay=0.05))


@pytest.fixture
def timed(race_db, monkeypatch):
    """A seeded NZ day on the simulated feed, the run's clock faked and shared with the feed."""
    clock = FakeClock(dt.datetime(2026, 11, 28, 17, 0, tzinfo=dt.UTC))
    feed_time = FeedTime(clock)
    with SimFeedServer(SimFeedConfig(seed=7), now=feed_time) as server:
        seed_day(server.feed, race_db, DAY, countries=("NZ",))
        monkeypatch.setattr(fetch, "CLOCK", RunClock(clock))
        client = TabClient(base_url=server.base_url, retry_backoff_seconds=0.01, timeout_seconds=5)
        feed = Feed(server, feed_time)
        races = server.feed.day(DAY)
        feed.reset()
        yield clock, races, client, feed


def _execute(instance, race_db, client, race_id: str, checkpoint: str, target: dt.datetime, attempt: int = 0,
             tags: dict | None = None, max_wait: dt.timedelta = AHEAD + WAIT_SLACK):
    config = checkpoint_run_config(race_id, checkpoint, target.isoformat(), attempt,
                                   max_wait_seconds=max_wait.total_seconds())
    return JOBS[checkpoint].execute_in_process(
        run_config=config, instance=instance, resources={"tab_client": client, "race_db": race_db},
        tags={"racing/race_id": race_id, **(tags or {})}, raise_on_error=False)


def _metadata(result, node: str) -> dict:
    return result.output_for_node(node)


def _move_start(race_db, race_id: str, start: dt.datetime) -> None:
    with race_db.begin() as conn:
        conn.execute(sa.text("UPDATE races SET start_time = :s WHERE race_id = :r"), {"s": start, "r": race_id})


@pytest.mark.integration
@pytest.mark.parametrize("fraction", [1.0, 0.5])  # 0.5: every sleep wakes halfway; still not one request early
@pytest.mark.parametrize("checkpoint", ["t15", "post"])
def test_a_run_started_ahead_fetches_exactly_at_its_target(pg_instance, race_db, timed, checkpoint, fraction) -> None:
    clock, races, client, feed = timed
    clock.fraction = fraction
    _, race = pick_race(races)
    spec = CHECKPOINTS[checkpoint]
    target = race.scheduled_start + spec.offset
    with race_db.begin() as conn:
        claim_checkpoint(conn, race.race_id, checkpoint, target)
    clock.now = target - dt.timedelta(seconds=31.5)  # the run worker is up 31.5 s before the target
    result = _execute(pg_instance, race_db, client, race.race_id, checkpoint, target)
    assert result.success
    assert feed.events_sent() == [target]  # one request, at the target to the microsecond
    if fraction == 1.0:
        assert clock.sleeps == [31.5]
    else:
        assert len(clock.sleeps) > 2  # woke early every time and slept again
    node = "take_odds_snapshot" if spec.pre_race else "check_race_result"
    summary = _metadata(result, node)
    assert summary["fetch_lateness_s"] == 0 and summary["waited_s"] == pytest.approx(31.5)
    assert summary["target"] == target.isoformat()
    run = pg_instance.get_run_by_id(result.run_id)
    assert "racing/late" not in run.tags
    with race_db.connect() as conn:
        assert checkpoint_row(conn, race.race_id, checkpoint).state in ("done", "waiting_final")


@pytest.mark.integration
def test_a_follow_up_attempt_waits_for_its_next_attempt_at_not_the_start(pg_instance, race_db, timed) -> None:
    clock, races, client, feed = timed
    _, race = pick_race(races)
    next_attempt_at = race.scheduled_start + dt.timedelta(minutes=10, seconds=7.25)
    with race_db.begin() as conn:
        claim_checkpoint(conn, race.race_id, "post", race.scheduled_start + dt.timedelta(minutes=5))
    clock.now = next_attempt_at - dt.timedelta(seconds=20)
    result = _execute(pg_instance, race_db, client, race.race_id, "post", next_attempt_at, attempt=1,
                      tags={"racing/attempt": "1"})
    assert result.success
    assert feed.events_sent() == [next_attempt_at]


@pytest.mark.integration
def test_a_start_moved_a_little_while_the_run_waits_moves_the_fetch(pg_instance, race_db, timed) -> None:
    clock, races, client, feed = timed
    _, race = pick_race(races)
    target = race.scheduled_start - dt.timedelta(minutes=15)
    with race_db.begin() as conn:
        claim_checkpoint(conn, race.race_id, "t15", target)
    moved_start = race.scheduled_start + dt.timedelta(seconds=20)
    # The start moves 20 s later while the run sleeps (e.g. another run stored a delay): waited 30 + 20 s <= 55 s.
    clock.on_sleep.append(lambda: _move_start(race_db, race.race_id, moved_start))
    clock.now = target - dt.timedelta(seconds=30)
    result = _execute(pg_instance, race_db, client, race.race_id, "t15", target)
    assert result.success
    new_target = moved_start - dt.timedelta(minutes=15)
    assert feed.events_sent() == [new_target]
    assert clock.sleeps == [30.0, 20.0]
    assert _metadata(result, "take_odds_snapshot")["target"] == new_target.isoformat()


@pytest.mark.integration
def test_a_start_moved_earlier_fetches_at_the_new_time_at_once(pg_instance, race_db, timed) -> None:
    clock, races, client, feed = timed
    _, race = pick_race(races)
    target = race.scheduled_start - dt.timedelta(minutes=15)
    _move_start(race_db, race.race_id, race.scheduled_start - dt.timedelta(seconds=40))
    clock.now = target - dt.timedelta(seconds=30)  # the new target passed 10 s ago
    result = _execute(pg_instance, race_db, client, race.race_id, "t15", target)
    assert result.success
    assert feed.events_sent() == [target - dt.timedelta(seconds=30)] and clock.sleeps == []
    assert _metadata(result, "take_odds_snapshot")["fetch_lateness_s"] == pytest.approx(10)


@pytest.mark.integration
def test_a_start_moved_far_hands_the_checkpoint_back_and_the_sensor_requests_it_at_the_new_time(
        pg_instance, race_db, timed, monkeypatch) -> None:
    clock, races, client, feed = timed
    monkeypatch.setattr(sensors, "sensor_now", lambda: clock.now)
    monkeypatch.setenv("RACING_CHECKPOINT_LAUNCH_AHEAD_SECONDS", "45")
    _, race = pick_race(races)
    sensor = sensors.CHECKPOINT_SENSORS["t15"]
    target = race.scheduled_start - dt.timedelta(minutes=15)
    clock.now = target - AHEAD
    with dg.build_sensor_context(instance=pg_instance, resources={"race_db": race_db}) as context:
        [request] = [r for r in sensor(context).run_requests if r.tags["racing/race_id"] == race.race_id]
    assert request.run_key == f"{race.race_id}:t15"
    moved_start = race.scheduled_start + dt.timedelta(minutes=8)  # a delay announced while the run waits
    clock.on_sleep.append(lambda: _move_start(race_db, race.race_id, moved_start))
    clock.advance(seconds=12)  # the run worker starts
    first = JOBS["t15"].execute_in_process(
        run_config=request.run_config, instance=pg_instance, resources={"tab_client": client, "race_db": race_db},
        tags=request.tags, raise_on_error=False)
    assert first.success
    assert feed.events_sent() == []  # gave way without calling TAB
    new_target = moved_start - dt.timedelta(minutes=15)
    run = pg_instance.get_run_by_id(first.run_id)
    assert run.tags["racing/rescheduled"] == new_target.isoformat() and run.tags["racing/outcome"] == "success"
    with race_db.connect() as conn:
        row = checkpoint_row(conn, race.race_id, "t15")
    assert (row.state, row.scheduled_for, row.run_id) == ("rescheduled", new_target, first.run_id)
    assert "start moved" in row.note
    clock.on_sleep.clear()
    # The sensor leaves it until the margin before the new target, then requests it once under a new key.
    clock.now = new_target - AHEAD - dt.timedelta(seconds=15)
    with dg.build_sensor_context(instance=pg_instance, resources={"race_db": race_db}) as context:
        early = sensor(context)
    assert not [r for r in getattr(early, "run_requests", None) or [] if r.tags["racing/race_id"] == race.race_id]
    clock.advance(seconds=15)
    with dg.build_sensor_context(instance=pg_instance, resources={"race_db": race_db}) as context:
        [again] = [r for r in sensor(context).run_requests if r.tags["racing/race_id"] == race.race_id]
    with dg.build_sensor_context(instance=pg_instance, resources={"race_db": race_db}) as context:
        twice = sensor(context)
    assert not [r for r in getattr(twice, "run_requests", None) or [] if r.tags["racing/race_id"] == race.race_id]
    assert again.run_key == f"{race.race_id}:t15:at{new_target:%Y%m%dT%H%M%SZ}"
    assert again.tags["racing/scheduled_for"] == new_target.isoformat()
    with race_db.connect() as conn:
        row = checkpoint_row(conn, race.race_id, "t15")
    assert (row.state, row.run_key, row.run_id) == ("requested", again.run_key, None)
    clock.advance(seconds=10)
    second = JOBS["t15"].execute_in_process(
        run_config=again.run_config, instance=pg_instance, resources={"tab_client": client, "race_db": race_db},
        tags=again.tags, raise_on_error=False)
    assert second.success
    assert feed.events_sent() == [new_target]
    with race_db.connect() as conn:
        assert checkpoint_row(conn, race.race_id, "t15").state == "done"


@pytest.mark.integration
@pytest.mark.parametrize(("late_by", "flagged"), [(10, False), (GRACE.total_seconds() + 1, True)])
def test_a_run_that_starts_after_its_target_fetches_at_once(pg_instance, race_db, timed, late_by, flagged) -> None:
    clock, races, client, feed = timed
    _, race = pick_race(races)
    target = race.scheduled_start - dt.timedelta(minutes=15)
    with race_db.begin() as conn:
        claim_checkpoint(conn, race.race_id, "t15", target)
    clock.now = target + dt.timedelta(seconds=late_by)
    result = _execute(pg_instance, race_db, client, race.race_id, "t15", target)
    assert result.success
    assert feed.events_sent() == [clock.now] and clock.sleeps == []
    assert _metadata(result, "take_odds_snapshot")["fetch_lateness_s"] == pytest.approx(late_by)
    tags = pg_instance.get_run_by_id(result.run_id).tags
    assert (tags.get("racing/late") == "true") == flagged


@pytest.mark.integration
def test_a_manual_check_fetches_at_once(pg_instance, race_db, timed) -> None:
    clock, races, client, feed = timed
    _, race = pick_race(races)
    clock.now = race.scheduled_start - dt.timedelta(minutes=30)
    config = checkpoint_run_config(race.race_id, "t15")
    result = JOBS["t15"].execute_in_process(
        run_config=config, instance=pg_instance, resources={"tab_client": client, "race_db": race_db},
        tags={"racing/race_id": race.race_id, "racing/triggered_by": "manual"}, raise_on_error=False)
    assert result.success and feed.events_sent() == [clock.now] and clock.sleeps == []


@pytest.mark.integration
def test_the_sensor_requests_ahead_with_the_target_and_the_wait_bound(pg_instance, race_db, timed, monkeypatch) -> None:
    clock, races, client, feed = timed
    monkeypatch.setattr(sensors, "sensor_now", lambda: clock.now)
    monkeypatch.setenv("RACING_CHECKPOINT_LAUNCH_AHEAD_SECONDS", "45")
    _, race = pick_race(races)
    target = race.scheduled_start - dt.timedelta(minutes=15)
    sensor = sensors.CHECKPOINT_SENSORS["t15"]

    def requested() -> list[dg.RunRequest]:
        with dg.build_sensor_context(instance=pg_instance, resources={"race_db": race_db}) as context:
            result = sensor(context)
        return [r for r in getattr(result, "run_requests", None) or [] if r.tags["racing/race_id"] == race.race_id]

    clock.now = target - AHEAD - dt.timedelta(seconds=1)
    assert requested() == []
    clock.advance(seconds=1)
    [request] = requested()
    config = request.run_config["ops"]["take_odds_snapshot"]["config"]
    assert config["scheduled_for"] == request.tags["racing/scheduled_for"] == target.isoformat()
    assert config["max_wait_seconds"] == 55.0  # the 45 s margin and 10 s of slack for clocks and the tick
    assert DEFAULT_MAX_WAIT_SECONDS >= config["max_wait_seconds"]
    with race_db.connect() as conn:
        row = checkpoint_row(conn, race.race_id, "t15")
    assert row.state == "requested" and row.scheduled_for == target
    # Its run starts 20 s later and fetches at the target.
    clock.advance(seconds=20)
    with race_db.begin() as conn:
        update_checkpoint(conn, race.race_id, "t15", note="launched")
    result = JOBS["t15"].execute_in_process(
        run_config=request.run_config, instance=pg_instance, resources={"tab_client": client, "race_db": race_db},
        tags=request.tags, raise_on_error=False)
    assert result.success and feed.events_sent() == [target]
