"""Checkpoint sensors: pure timing decisions, and a whole simulated racing day ticked every 15 s on Postgres."""

import datetime as dt
from collections import defaultdict
from contextlib import ExitStack

import dagster as dg
import pytest
import sqlalchemy as sa

from orchestration_core.dagster_tags import AUTO_RETRY_RUN_ID_TAG, RUN_KEY_TAG, WILL_RETRY_TAG
from racing_orchestration.checkpoints import sensors
from racing_orchestration.checkpoints.jobs import POST_RACE_DELAYS_SECONDS
from racing_orchestration.checkpoints.windows import (
    CHECKPOINTS,
    GRACE,
    MAX_RELAUNCHES,
    Action,
    Relaunch,
    checkpoint_spec,
    decide,
    decide_relaunch,
    retry_key,
    run_key,
    start_window,
)
from racing_orchestration.race_db.checkpoints import await_next_attempt, update_checkpoint
from racing_orchestration.race_db.queries import race_row
from racing_orchestration.race_db.store import upsert_event
from racing_orchestration.tab.sim_engine import SimFeed, SimFeedConfig
from tests.racing_orchestration.checkpoint_support import Clock, fetch_event, seed_day

START = dt.datetime(2026, 11, 29, 1, 0, tzinfo=dt.UTC)
T60, T15, POST = CHECKPOINTS["t60"], CHECKPOINTS["t15"], CHECKPOINTS["post"]
TICK = dt.timedelta(seconds=15)
# The numbers these tests pin, written out (never read back from the code under test): the default launch-ahead
# margin (README "Checkpoint timing"), each checkpoint's time from the race's start (T-60, T-15, T+5) and the
# post-race chain's 5/5/10 minutes (the old scheduler's POST_RACE delays, seeds/racing-scheduler-phase3.md).
DEFAULT_AHEAD = dt.timedelta(seconds=45)
OFFSET = {"t60": dt.timedelta(minutes=-60), "t15": dt.timedelta(minutes=-15), "post": dt.timedelta(minutes=5)}
CHAIN_WAITS = [dt.timedelta(minutes=5), dt.timedelta(minutes=5), dt.timedelta(minutes=10)]


@pytest.mark.unit
@pytest.mark.parametrize(
    ("spec", "minutes_after_due", "status", "action", "reason"),
    [
        (T60, -0.1, "Open", Action.WAIT, ""),
        (T60, 0, "Open", Action.REQUEST, ""),
        (T60, 2, "Open", Action.REQUEST, ""),  # on the grace's edge: still on time
        (T60, 3, "Open", Action.REQUEST_LATE, "late by 180 s (grace 120 s)"),
        (T60, 59, "Open", Action.REQUEST_LATE, "late by 3540 s (grace 120 s)"),
        # race started: pre-race odds are gone
        (T60, 61, "Open", Action.SKIP,
         "missed by 3660 s: race already started (status Open), odds no longer pre-race"),
        (T15, 5, "Closed", Action.SKIP,
         "missed by 300 s: race already started (status Closed), odds no longer pre-race"),
        (T15, 0, "Abandoned", Action.SKIP, "race abandoned"),
        (T15, -0.5, "Abandoned", Action.WAIT, ""),  # not due yet: nothing is recorded before its time
        (POST, 0, "Abandoned", Action.SKIP, "race abandoned"),
        (POST, 0, "Open", Action.REQUEST, ""),  # delayed jump: the results check's own retries wait for it
        (POST, 150, "Final", Action.REQUEST_LATE, "late by 9000 s (grace 120 s)"),
        (POST, 180, "Final", Action.REQUEST_LATE, "late by 10800 s (grace 120 s)"),  # on the late limit: still taken
        (POST, 181, "Final", Action.SKIP, "missed by 10860 s: beyond the 10800 s late limit"),
    ],
)
def test_decide(spec, minutes_after_due, status, action, reason) -> None:
    """The action, the lateness the ledger records and the reason an operator reads: skips and late runs are never
    silent."""
    now = START + spec.offset + dt.timedelta(minutes=minutes_after_due)
    decision = decide(spec, START, status, now)
    assert (decision.action, decision.lateness, decision.reason) == (
        action, dt.timedelta(minutes=minutes_after_due), reason)


@pytest.mark.unit
@pytest.mark.parametrize(
    ("spec", "minutes_after_due", "status", "run_status", "relaunches", "action", "state", "says"),
    [
        (T15, 3, "Open", "STARTED", 0, Relaunch.WAIT, "", ""),  # its run may still take it
        (T15, 3, "Open", "QUEUED", 3, Relaunch.WAIT, "", ""),
        (T15, 3, "Open", None, 0, Relaunch.SAME_KEY, "", "no run picked up the request; requested again (1/3)"),
        (T15, 3, "Open", "FAILURE", 0, Relaunch.NEW_KEY, "", "ended FAILURE without taking the checkpoint; requested again (1/3)"),
        (T15, 14, "Open", "CANCELED", 2, Relaunch.NEW_KEY, "", "requested again (3/3)"),
        (T15, 14, "Open", "FAILURE", 3, Relaunch.GIVE_UP, "failed", "gave up after 3 re-requests"),
        (T15, 15, "Open", "FAILURE", 0, Relaunch.GIVE_UP, "failed", "race already started"),  # at the start: too late
        (T60, 30, "Closed", None, 0, Relaunch.GIVE_UP, "failed", "race already started"),
        (T60, 5, "Abandoned", "FAILURE", 0, Relaunch.GIVE_UP, "skipped", "race abandoned"),
        (T60, 5, "Open", "SUCCESS", 0, Relaunch.GIVE_UP, "failed",
         "its run succeeded without recording the checkpoint; not requested again"),
        (POST, 20, "Interim", "FAILURE", 1, Relaunch.NEW_KEY, "", "requested again (2/3)"),
        (POST, 179, "Final", "FAILURE", 0, Relaunch.NEW_KEY, "", "requested again (1/3)"),  # within the late limit
        (POST, 181, "Final", "FAILURE", 0, Relaunch.GIVE_UP, "failed", "beyond the 10800 s late limit"),
    ],
)
def test_decide_relaunch(spec, minutes_after_due, status, run_status, relaunches, action, state, says) -> None:
    now = START + spec.offset + dt.timedelta(minutes=minutes_after_due)
    decision = decide_relaunch(spec, START, status, now, run_status=run_status, relaunches=relaunches)
    assert decision.action == action
    assert decision.ledger_state == state
    assert says in decision.reason
    assert MAX_RELAUNCHES == 3


@pytest.mark.unit
@pytest.mark.parametrize(("minutes_after_due", "action", "says"), [
    (59, Relaunch.NEW_KEY, "its run ended FAILURE without taking the checkpoint; requested again (1/3)"),
    (61, Relaunch.GIVE_UP, "its run ended FAILURE without taking the checkpoint; not requested again: "
                           "missed by 3660 s: beyond the 3600 s late limit"),
])
def test_a_re_request_follows_the_late_limit_it_is_given(minutes_after_due, action, says) -> None:
    now = START + POST.offset + dt.timedelta(minutes=minutes_after_due)
    decision = decide_relaunch(POST, START, "Final", now, run_status="FAILURE", relaunches=0,
                               post_late_limit=dt.timedelta(hours=1))
    assert (decision.action, decision.reason) == (action, says)


@pytest.mark.unit
def test_a_re_request_within_the_grace_it_is_given_is_on_time_whatever_the_late_limit() -> None:
    now = START + POST.offset + dt.timedelta(minutes=200)
    decision = decide_relaunch(POST, START, "Final", now, run_status="FAILURE", relaunches=0,
                               grace=dt.timedelta(hours=4))
    assert decision.action == Relaunch.NEW_KEY


@pytest.mark.unit
def test_retry_keys_are_new_per_attempt() -> None:
    base = run_key("r1", T15)
    assert [retry_key(base, n) for n in (1, 2, 3)] == ["r1:t15:retry1", "r1:t15:retry2", "r1:t15:retry3"]
    assert retry_key(run_key("r1", POST, 2), 1) == "r1:post:2:retry1"


@pytest.mark.unit
@pytest.mark.parametrize(("name", "label", "offset"), [("t60", "T-60", -60), ("t15", "T-15", -15), ("post", "T+5", 5)])
def test_checkpoint_spec_by_name(name: str, label: str, offset: int) -> None:
    spec = checkpoint_spec(name)
    assert (spec.name, spec.label, spec.offset) == (name, label, dt.timedelta(minutes=offset))


@pytest.mark.unit
def test_an_unknown_checkpoint_name_is_refused_with_the_valid_ones() -> None:
    with pytest.raises(ValueError) as refused:
        checkpoint_spec("t30")
    assert str(refused.value) == "unknown checkpoint 't30'; choose one of ['post', 't15', 't60']"


@pytest.mark.unit
@pytest.mark.parametrize(("spec", "ahead_seconds", "lo", "hi"), [
    # (lo, hi] of start times whose checkpoint falls due in (now - 24 h, now + ahead]
    (T60, 0, dt.datetime(2026, 11, 28, 11, 0), dt.datetime(2026, 11, 29, 11, 0)),
    (T15, 45, dt.datetime(2026, 11, 28, 10, 15, 45), dt.datetime(2026, 11, 29, 10, 15, 45)),
    (POST, 45, dt.datetime(2026, 11, 28, 9, 55, 45), dt.datetime(2026, 11, 29, 9, 55, 45)),
])
def test_start_window(spec, ahead_seconds, lo, hi) -> None:
    now = dt.datetime(2026, 11, 29, 10, 0, tzinfo=dt.UTC)
    assert start_window(spec, now, ahead=dt.timedelta(seconds=ahead_seconds)) == (
        lo.replace(tzinfo=dt.UTC), hi.replace(tzinfo=dt.UTC))
    short = start_window(spec, now, dt.timedelta(hours=1), dt.timedelta(seconds=ahead_seconds))
    assert short == (hi.replace(tzinfo=dt.UTC) - dt.timedelta(hours=1), hi.replace(tzinfo=dt.UTC))


@pytest.mark.unit
@pytest.mark.parametrize(("spec", "attempt", "key"), [(T60, 0, "r1:t60"), (POST, 0, "r1:post"), (POST, 3, "r1:post:3")])
def test_run_key_names_the_chain_attempt(spec, attempt, key) -> None:
    assert run_key("r1", spec, attempt) == key


def _context(instance, race_db):
    return dg.build_sensor_context(instance=instance, resources={"race_db": race_db})


def _tick(sensor, instance, race_db):
    with dg.build_sensor_context(instance=instance, resources={"race_db": race_db}) as context:
        return sensor(context)


def _requests(result) -> list[dg.RunRequest]:
    return list(result.run_requests or []) if isinstance(result, dg.SensorResult) else []


def _next_due(message: str) -> dt.datetime:
    if "next due at " not in message:
        return dt.datetime.max.replace(tzinfo=dt.UTC)
    stamp = message.split("next due at ")[1][:19]
    return dt.datetime.strptime(stamp, "%Y-%m-%d %H:%M:%S").replace(tzinfo=dt.UTC)


def _simulate_run(conn, feed, request, name: str, clock: Clock, stuck: str) -> str:
    """What the requested run does to the race DB and the ledger (the job itself is tested in test_checkpoint_jobs):
    it fetches at its target, the request's `racing/scheduled_for` (the sensor requested it ahead of that)."""
    race_id = request.tags["racing/race_id"]
    attempt = int(request.tags.get("racing/attempt", "0"))
    run_id = f"run-{race_id}-{name}-{attempt}"
    update_checkpoint(conn, race_id, name, state="running", run_id=run_id)
    sensor_time = clock.now
    now = clock.now = max(sensor_time, dt.datetime.fromisoformat(request.tags["racing/scheduled_for"]))
    try:
        event = fetch_event(feed, race_id)
    finally:
        clock.now = sensor_time
    upsert_event(conn, event)  # status and start-time changes
    status = "Interim" if race_id == stuck and event.race.status == "Final" else event.race.status
    if status == "Abandoned":
        state = "abandoned"
    elif name != "post" or status == "Final":
        state = "done"
    elif attempt < len(POST_RACE_DELAYS_SECONDS):
        # The job's own chain (its default config), so the expectations below catch a changed chain.
        await_next_attempt(conn, race_id, name, attempt=attempt, run_id=run_id,
                           next_attempt_at=now + dt.timedelta(seconds=POST_RACE_DELAYS_SECONDS[attempt]))
        return run_id
    else:
        state = "provisional"
    update_checkpoint(conn, race_id, name, state=state)
    return run_id


@pytest.mark.integration
def test_a_whole_day_tick_by_tick_requests_each_checkpoint_once(pg_instance, race_db, monkeypatch) -> None:
    monkeypatch.delenv("RACING_CHECKPOINT_LAUNCH_AHEAD_SECONDS", raising=False)  # the default margin
    clock = Clock(dt.datetime(2026, 11, 28, 17, 0, tzinfo=dt.UTC))  # 06:00 NZDT on 29 Nov
    # Final 800 s after the jump: post-race attempts at jump+300 and +600 see Interim, +900 sees Final.
    feed = SimFeed(SimFeedConfig(seed=7, final_after_seconds=800), now=clock)
    day = clock.now.astimezone(dt.timezone(dt.timedelta(hours=13))).date()
    seed_day(feed, race_db, day)
    monkeypatch.setattr(sensors, "sensor_now", clock)
    sim_races = {race.race_id: race for meeting in feed.day(day) if meeting.country in ("NZ", "AUS")
                 for race in meeting.races}
    # One race whose result is never declared Final (a protest): attempts 0..3, then provisional.
    stuck = next(r.race_id for r in sorted(sim_races.values(), key=lambda r: r.scheduled_start)
                 if r.abandoned_at is None and not r.delay)
    first = min(r.scheduled_start for r in sim_races.values()) - dt.timedelta(minutes=62)
    last = max(r.jump() for r in sim_races.values()) + dt.timedelta(minutes=27)
    clock.now = first
    ahead = DEFAULT_AHEAD  # requests come this long before their targets
    # (attempt, target) of every request; each request's own time is checked against its target as it comes.
    requests: dict[tuple[str, str], list[tuple[int, dt.datetime]]] = defaultdict(list)
    run_ids: dict[tuple[str, str, int], str] = {}
    skips: list[str] = []
    restarted = False
    evaluated = 0
    # One context per sensor, as the daemon's code server keeps its resources; rebuilt at the restart below.
    contexts = ExitStack()
    built = {name: contexts.enter_context(_context(pg_instance, race_db)) for name in CHECKPOINTS}
    while clock.now <= last:
        tick_requested = False
        evaluated += 1
        for name, sensor in sensors.CHECKPOINT_SENSORS.items():
            result = sensor(built[name])
            if isinstance(result, dg.SkipReason):
                assert result.skip_message.startswith(f"No {CHECKPOINTS[name].label} checkpoint due")
                skips.append(result.skip_message)
            for request in _requests(result):
                race_id = request.tags["racing/race_id"]
                attempt = int(request.tags.get("racing/attempt", "0"))
                scheduled = dt.datetime.fromisoformat(request.tags["racing/scheduled_for"])
                if attempt == 0:  # T-60, T-15, T+5 from the race's start as stored when requested
                    with race_db.connect() as conn:
                        start = race_row(conn, race_id).start_time
                    assert scheduled == start + OFFSET[name], (race_id, name, scheduled, start)
                assert request.run_key == (f"{race_id}:{name}" if attempt == 0 else f"{race_id}:{name}:{attempt}")
                # Launch ahead: requested within one tick after `ahead` before the target (the run waits for it).
                assert scheduled - ahead <= clock.now < scheduled - ahead + TICK, (race_id, name, scheduled, clock.now)
                assert "racing/late" not in request.tags
                if attempt:
                    assert request.tags["racing/previous_run_id"] == run_ids[(race_id, name, attempt - 1)]
                    assert request.run_config["ops"]["check_race_result"]["config"]["attempt"] == attempt
                requests[(race_id, name)].append((attempt, scheduled))
                tick_requested = True
                with race_db.begin() as conn:
                    run_ids[(race_id, name, attempt)] = _simulate_run(conn, feed, request, name, clock, stuck)
        if not tick_requested and (restarted or clock.now + dt.timedelta(hours=1) < first + dt.timedelta(hours=6)):
            # Every sensor skipped and named its next due time: the ticks before that one are idle, so jump to the
            # last 15 s tick before it (a wrong hint would show up as a late or missing request below).
            hint = min(_next_due(message) for message in skips[-3:]) - ahead  # requested `ahead` of it
            ticks = max(1, int((hint - clock.now) / TICK))
            clock.advance(seconds=15 * min(ticks - 1, 200))
        if not restarted and clock.now >= first + dt.timedelta(hours=6):
            # Daemon restart and the cleanup job deleting every run: the same tick again requests nothing.
            restarted = True
            pg_instance.wipe()
            contexts.close()
            built = {name: contexts.enter_context(_context(pg_instance, race_db)) for name in CHECKPOINTS}
            assert all(not _requests(_tick(s, pg_instance, race_db)) for s in sensors.CHECKPOINT_SENSORS.values())
        clock.advance(seconds=15)
    contexts.close()
    assert restarted
    print(f"{evaluated} ticks evaluated, {len(requests)} requests")
    for (race_id, name), taken in requests.items():
        assert [attempt for attempt, _ in taken] == list(range(len(taken))), ("requested twice or out of order", taken)
        if name != "post":
            assert len(taken) == 1
        for (attempt, at), (_, following) in zip(taken, taken[1:], strict=False):
            # The 5/5/10 chain, target to target: each attempt's run fetched at its own target.
            assert following - at == CHAIN_WAITS[attempt], (race_id, attempt, following - at)
    for race_id, race in sim_races.items():
        taken = {name for name in CHECKPOINTS if (race_id, name) in requests}
        if race.abandoned_at is None:
            assert taken == {"t60", "t15", "post"}, (race_id, taken)
        else:
            # The first run that sees the abandonment is the last one.
            seen = [name for name in ("t60", "t15", "post") if name in taken]
            assert seen and seen == ["t60", "t15", "post"][: len(seen)]
            assert requests[(race_id, seen[-1])][0][1] >= race.abandoned_at or seen[-1] == "post"
    with race_db.connect() as conn:
        ledger = conn.execute(sa.text("SELECT state, note, count(*) FROM race_checkpoints GROUP BY 1, 2")).all()
        posts = {row.race_id: row for row in conn.execute(sa.text(
            "SELECT race_id, state, attempt FROM race_checkpoints WHERE checkpoint = 'post'"))}
    # A plain race: Interim at attempts 0 and 1, Final at attempt 2 (T+5, T+10, T+15), nothing after.
    plain = next(r for r in sim_races.values() if r.abandoned_at is None and not r.delay and r.race_id != stuck)
    chain = requests[(plain.race_id, "post")]
    assert [a for a, _ in chain] == [0, 1, 2]
    due = plain.scheduled_start + dt.timedelta(minutes=5)
    for (_, target), offset in zip(chain, (0, 5, 10), strict=True):
        assert target == due + dt.timedelta(minutes=offset)
    assert (posts[plain.race_id].state, posts[plain.race_id].attempt) == ("done", 2)
    assert [a for a, _ in requests[(stuck, "post")]] == [0, 1, 2, 3]
    # Its whole chain: T+5, then 5, 5 and 10 minutes later (T+10, T+15, T+25).
    stuck_due = sim_races[stuck].scheduled_start + dt.timedelta(minutes=5)
    assert [target - stuck_due for _, target in requests[(stuck, "post")]] == [
        dt.timedelta(minutes=m) for m in (0, 5, 10, 20)]
    assert (posts[stuck].state, posts[stuck].attempt) == ("provisional", 3)
    states = {(state, note): n for state, note, n in ledger}
    assert sum(states.values()) == 3 * len(sim_races)
    assert {state for state, _ in states} <= {"done", "abandoned", "provisional", "skipped"}
    assert all(note == "race abandoned" for state, note in states if state == "skipped")
    assert any("next due at" in message for message in skips)


def _nz_day(race_db, monkeypatch) -> tuple[Clock, list]:
    """29 Nov's NZ races stored (06:00 NZDT scrape) and the sensors on a controllable clock; races by start time."""
    clock = Clock(dt.datetime(2026, 11, 28, 17, 0, tzinfo=dt.UTC))
    feed = SimFeed(SimFeedConfig(seed=7), now=clock)
    seed_day(feed, race_db, dt.date(2026, 11, 29), countries=("NZ",))
    monkeypatch.setattr(sensors, "sensor_now", clock)
    races = sorted((r for m in feed.day(dt.date(2026, 11, 29)) if m.country == "NZ" for r in m.races),
                   key=lambda r: r.scheduled_start)
    return clock, races


@pytest.mark.integration
def test_a_claimed_checkpoint_no_run_picked_up_is_requested_again(pg_instance, race_db, monkeypatch) -> None:
    """Daemon crash between the claim and the launch: the same run key is requested again after LAUNCH_GAP."""
    clock, races = _nz_day(race_db, monkeypatch)
    race = races[0]
    sensor = sensors.CHECKPOINT_SENSORS["t15"]
    clock.now = race.scheduled_start - dt.timedelta(minutes=15)
    first = [r for r in _requests(_tick(sensor, pg_instance, race_db)) if r.tags["racing/race_id"] == race.race_id]
    assert len(first) == 1  # claimed; the daemon "crashes" before launching it
    clock.advance(seconds=60)
    assert not _requests(_tick(sensor, pg_instance, race_db))  # within the gap: nothing
    clock.advance(seconds=65)
    again = [r for r in _requests(_tick(sensor, pg_instance, race_db)) if r.tags["racing/race_id"] == race.race_id]
    assert [r.run_key for r in again] == [first[0].run_key]
    assert again[0].run_config == first[0].run_config
    # This time the run exists (launched, still queued): no third request, even after another gap.
    run = pg_instance.create_run_for_job(job_def=sensors.CHECKPOINT_JOBS["t15"], run_config=again[0].run_config,
                                         tags={**again[0].tags, RUN_KEY_TAG: again[0].run_key})
    clock.advance(seconds=130)
    assert not _requests(_tick(sensor, pg_instance, race_db))
    # A run that started marks the ledger with its run id: not requested again while that run lives.
    with race_db.begin() as conn:
        update_checkpoint(conn, race.race_id, "t15", state="running", run_id=run.run_id)
    clock.advance(seconds=130)
    assert not _requests(_tick(sensor, pg_instance, race_db))


@pytest.mark.integration
def test_after_an_outage_pre_race_is_taken_late_or_skipped_with_a_reason(pg_instance, race_db, monkeypatch) -> None:
    clock, races = _nz_day(race_db, monkeypatch)
    target = races[3]
    # The daemon comes back 30 min after this race's T-60: T-60 is taken late, earlier started races are skipped.
    clock.now = target.scheduled_start - dt.timedelta(minutes=30)
    result = _tick(sensors.CHECKPOINT_SENSORS["t60"], pg_instance, race_db)
    by_race = {r.tags["racing/race_id"]: r for r in _requests(result)}
    assert by_race[target.race_id].tags["racing/late"] == "true"
    with race_db.connect() as conn:
        rows = {row.race_id: row for row in conn.execute(sa.text("SELECT * FROM race_checkpoints WHERE checkpoint='t60'"))}
    assert rows[target.race_id].state == "requested_late" and "late by 1800 s" in rows[target.race_id].note
    started = [r for r in races if r.scheduled_start <= clock.now]
    for race in started:
        assert rows[race.race_id].state == "skipped" and "race already started" in rows[race.race_id].note
    # Nothing new: a skip reason that names why.
    again = _tick(sensors.CHECKPOINT_SENSORS["t60"], pg_instance, race_db)
    assert isinstance(again, dg.SkipReason) and "next due at" in again.skip_message
    assert GRACE == dt.timedelta(minutes=2)


def _launch(instance, request, status: dg.DagsterRunStatus, checkpoint: str = "t15") -> dg.DagsterRun:
    """A run the daemon launched for `request`, ended in `status` without reaching the ledger (database down)."""
    return instance.create_run_for_job(job_def=sensors.CHECKPOINT_JOBS[checkpoint], run_config=request.run_config,
                                       status=status, tags={**request.tags, RUN_KEY_TAG: request.run_key})


def _ledger_row(race_db, race_id: str, checkpoint: str):
    with race_db.connect() as conn:
        return conn.execute(sa.text("SELECT * FROM race_checkpoints WHERE race_id = :r AND checkpoint = :c"),
                            {"r": race_id, "c": checkpoint}).one()


def _for(result, race_id: str) -> list[dg.RunRequest]:
    return [r for r in _requests(result) if r.tags["racing/race_id"] == race_id]


@pytest.mark.integration
@pytest.mark.parametrize("ended", [dg.DagsterRunStatus.FAILURE, dg.DagsterRunStatus.CANCELED])
def test_a_checkpoint_whose_run_failed_is_requested_again_with_a_new_key_until_the_bound(
        pg_instance, race_db, monkeypatch, ended) -> None:
    """Postgres down during a dense window: the run fails before it can take the checkpoint; its run key is then
    taken for good (Dagster's run-key dedupe counts failed runs), so each re-request needs a new key, bounded."""
    clock, races = _nz_day(race_db, monkeypatch)
    race = races[0]
    sensor = sensors.CHECKPOINT_SENSORS["t15"]
    clock.now = race.scheduled_start - dt.timedelta(minutes=15)
    [first] = _for(_tick(sensor, pg_instance, race_db), race.race_id)
    _launch(pg_instance, first, ended)
    keys = [first.run_key]
    for n in (1, 2, 3):  # the cap: requested again at most 3 times
        clock.advance(seconds=125)
        [again] = _for(_tick(sensor, pg_instance, race_db), race.race_id)
        assert again.run_key == f"{first.run_key}:retry{n}"
        assert again.run_config == first.run_config
        row = _ledger_row(race_db, race.race_id, "t15")
        assert row.state == "requested" and row.relaunches == n and row.run_key == again.run_key
        assert ended.value in row.note and f"{n}/3" in row.note
        keys.append(again.run_key)
        _launch(pg_instance, again, ended)
    clock.advance(seconds=125)
    assert not _for(_tick(sensor, pg_instance, race_db), race.race_id)
    row = _ledger_row(race_db, race.race_id, "t15")
    assert row.state == "failed" and "gave up after 3 re-requests" in row.note
    assert len(set(keys)) == len(keys) == 4


@pytest.mark.integration
def test_a_failed_pre_race_run_is_not_requested_after_the_start_and_ends_failed(pg_instance, race_db, monkeypatch) -> None:
    clock, races = _nz_day(race_db, monkeypatch)
    race = races[0]
    sensor = sensors.CHECKPOINT_SENSORS["t15"]
    clock.now = race.scheduled_start - dt.timedelta(minutes=15)
    [first] = _for(_tick(sensor, pg_instance, race_db), race.race_id)
    _launch(pg_instance, first, dg.DagsterRunStatus.FAILURE)
    clock.now = race.scheduled_start + dt.timedelta(seconds=5)  # the sensor looks again only after the jump
    assert not _for(_tick(sensor, pg_instance, race_db), race.race_id)
    row = _ledger_row(race_db, race.race_id, "t15")
    assert row.state == "failed" and "FAILURE" in row.note and "race already started" in row.note


@pytest.mark.integration
def test_a_queued_run_is_left_alone_and_a_never_launched_request_keeps_its_key(pg_instance, race_db, monkeypatch) -> None:
    clock, races = _nz_day(race_db, monkeypatch)
    race = races[0]
    sensor = sensors.CHECKPOINT_SENSORS["t15"]
    clock.now = race.scheduled_start - dt.timedelta(minutes=15)
    [first] = _for(_tick(sensor, pg_instance, race_db), race.race_id)
    clock.advance(seconds=125)  # never launched (daemon crash): same key again, counted
    [again] = _for(_tick(sensor, pg_instance, race_db), race.race_id)
    assert again.run_key == first.run_key
    assert _ledger_row(race_db, race.race_id, "t15").relaunches == 1
    _launch(pg_instance, again, dg.DagsterRunStatus.STARTED)  # launched, still running
    clock.advance(seconds=125)
    assert not _for(_tick(sensor, pg_instance, race_db), race.race_id)
    row = _ledger_row(race_db, race.race_id, "t15")
    assert row.state == "requested" and row.relaunches == 1


@pytest.mark.integration
def test_a_checkpoint_whose_run_died_after_marking_it_running_is_requested_again(pg_instance, race_db, monkeypatch) -> None:
    """The database went away mid-run: the run marked the ledger `running`, then failed without recording the end."""
    clock, races = _nz_day(race_db, monkeypatch)
    race = races[0]
    sensor = sensors.CHECKPOINT_SENSORS["t15"]
    clock.now = race.scheduled_start - dt.timedelta(minutes=15)
    [first] = _for(_tick(sensor, pg_instance, race_db), race.race_id)
    run = _launch(pg_instance, first, dg.DagsterRunStatus.STARTED)
    with race_db.begin() as conn:
        update_checkpoint(conn, race.race_id, "t15", state="running", run_id=run.run_id)
    clock.advance(seconds=125)
    assert not _for(_tick(sensor, pg_instance, race_db), race.race_id)  # still running: left alone
    pg_instance.report_run_failed(run, "code location lost its database")
    clock.advance(seconds=125)
    [again] = _for(_tick(sensor, pg_instance, race_db), race.race_id)
    assert again.run_key == f"{first.run_key}:retry1"
    row = _ledger_row(race_db, race.race_id, "t15")
    assert (row.state, row.run_id, row.relaunches) == ("requested", None, 1)
    assert "FAILURE" in row.note


@pytest.mark.integration
def test_a_run_that_dagster_retries_is_not_requested_again_beside_its_retry(pg_instance, race_db, monkeypatch) -> None:
    """The run marked the ledger `running`, then its worker lost the database: Dagster's run retries re-execute it
    under the same run key. Requesting it again as well would take the checkpoint twice."""
    clock, races = _nz_day(race_db, monkeypatch)
    race = races[0]
    sensor = sensors.CHECKPOINT_SENSORS["t15"]
    clock.now = race.scheduled_start - dt.timedelta(minutes=15)
    [first] = _for(_tick(sensor, pg_instance, race_db), race.race_id)
    run = _launch(pg_instance, first, dg.DagsterRunStatus.STARTED)
    with race_db.begin() as conn:
        update_checkpoint(conn, race.race_id, "t15", state="running", run_id=run.run_id)
    pg_instance.report_run_failed(run, "run worker lost its database")
    pg_instance.add_run_tags(run.run_id, {WILL_RETRY_TAG: "true"})
    # The runs' end times are real, the sensors' clock is on the race day: the retry is "still coming" however far.
    monkeypatch.setattr(sensors, "RUN_RETRY_GRACE", dt.timedelta(days=3650), raising=False)
    clock.advance(seconds=125)
    assert not _for(_tick(sensor, pg_instance, race_db), race.race_id)  # its retry is coming
    retry = _launch(pg_instance, first, dg.DagsterRunStatus.STARTING)
    pg_instance.add_run_tags(run.run_id, {AUTO_RETRY_RUN_ID_TAG: retry.run_id})
    clock.advance(seconds=125)
    assert not _for(_tick(sensor, pg_instance, race_db), race.race_id)  # the retry is starting: left alone
    pg_instance.report_run_failed(retry, "failed again")
    clock.advance(seconds=125)
    [again] = _for(_tick(sensor, pg_instance, race_db), race.race_id)  # no retry left: the sensor's turn
    assert again.run_key == f"{first.run_key}:retry1"
    assert "FAILURE" in _ledger_row(race_db, race.race_id, "t15").note


@pytest.mark.unit
@pytest.mark.parametrize(("status", "will_retry", "ended_seconds_ago", "counts_as"), [
    ("FAILURE", "true", 10, "QUEUED"),  # Dagster's run retries will re-execute it: wait for that
    ("FAILURE", "true", 119, "QUEUED"),
    ("FAILURE", "true", 120, "FAILURE"),  # the promised retry never came: the sensor requests it itself
    ("FAILURE", "true", None, "FAILURE"),
    ("FAILURE", "false", 10, "FAILURE"),
    ("FAILURE", None, 10, "FAILURE"),
    ("CANCELED", "true", 10, "CANCELED"),  # canceled runs are never retried by Dagster
    ("STARTED", None, None, "STARTED"),
])
def test_a_failed_run_with_a_retry_coming_counts_as_queued(status, will_retry, ended_seconds_ago, counts_as) -> None:
    ago = None if ended_seconds_ago is None else dt.timedelta(seconds=ended_seconds_ago)
    assert sensors.status_counting_run_retries(status, will_retry, ago) == counts_as


@pytest.mark.unit
@pytest.mark.parametrize(("minutes_after_due", "relaunches", "action", "says"), [
    (3, 0, Relaunch.NEW_KEY, "its run vanished; requested again (1/3)"),  # its key may be taken: a new one
    (3, 3, Relaunch.GIVE_UP, "its run vanished; gave up after 3 re-requests"),
    (16, 0, Relaunch.GIVE_UP, "its run vanished; not requested again: missed by"),
])
def test_decide_relaunch_of_a_row_whose_run_is_gone(minutes_after_due, relaunches, action, says) -> None:
    now = START + T15.offset + dt.timedelta(minutes=minutes_after_due)
    decision = decide_relaunch(T15, START, "Open", now, run_status=None, relaunches=relaunches, launched=True)
    assert decision.action == action and says in decision.reason
