"""Checkpoint jobs in process against Postgres and the simulated feed on a socket (its clock driven by the test)."""

import datetime as dt
from contextlib import contextmanager
from dataclasses import dataclass

import dagster as dg
import pytest
import sqlalchemy as sa
from dagster._core.definitions.policy import calculate_delay

from racing_orchestration.checkpoints import sensors
from racing_orchestration.checkpoints.jobs import (
    CHECKPOINT_JOBS,
    MAX_RUNTIME_TAG,
    POST_RACE_DELAYS_SECONDS,
    PRE_RACE_MAX_RUNTIME_SECONDS,
    PRE_RACE_RETRY_POLICY,
    build_checkpoint_jobs,
    checkpoint_run_config,
)
from racing_orchestration.checkpoints.windows import CHECKPOINTS, no_longer_pre_race
from orchestration_core.dagster_tags import RUN_KEY_TAG
from racing_orchestration.checkpoints.fetch import TAG_SUPERSEDED
from racing_orchestration.race_db.checkpoints import checkpoint_row, claim_checkpoint, record_relaunch
from racing_orchestration.settings import launch_ahead
from racing_orchestration.race_db.queries import dividends_for_race, final_dividends, odds_for_race, race_row, results_for_race
from orchestration_core.run_outcome import TAG_OUTCOME
from racing_orchestration.tab.client import TabClient
from racing_orchestration.tab.sim_engine import SimFeedConfig
from racing_orchestration.tab.sim_feed import SimFeedServer
from tests.racing_orchestration.checkpoint_support import Clock, pick_race, seed_day

DAY = dt.date(2026, 11, 29)
FAST = dg.RetryPolicy(max_retries=2, delay=0.05, backoff=dg.Backoff.LINEAR)
JOBS = build_checkpoint_jobs(FAST)


@pytest.mark.unit
@pytest.mark.parametrize(("attempt", "seconds"), [(1, 60), (2, 120)])
def test_pre_race_retry_policy_waits_one_then_two_minutes(attempt, seconds) -> None:
    policy = PRE_RACE_RETRY_POLICY
    assert policy.max_retries == 2
    assert calculate_delay(attempt, policy.backoff, policy.jitter, policy.delay) == seconds


@pytest.mark.unit
def test_post_race_chain_is_five_five_ten_minutes() -> None:
    assert POST_RACE_DELAYS_SECONDS == (300, 300, 600)


@pytest.mark.unit
@pytest.mark.parametrize(("name", "seconds"), [("t60", "480"), ("t15", "480"), ("post", "300")])
def test_each_checkpoint_job_carries_its_max_runtime_and_its_sensor_ticks_every_15_s(name, seconds) -> None:
    assert CHECKPOINT_JOBS[name].tags[MAX_RUNTIME_TAG] == seconds  # 8 min pre-race, 5 min post-race
    assert sensors.CHECKPOINT_SENSORS[name].minimum_interval_seconds == 15


@pytest.mark.unit
@pytest.mark.parametrize("name", sorted(CHECKPOINTS))
def test_checkpoint_runs_are_bounded_so_a_dead_worker_cannot_hold_a_checkpoint(name) -> None:
    # A run whose worker died while Postgres was down stays STARTED until run monitoring cancels it at this bound.
    import yaml

    from tests.conftest import REPO_ROOT

    bound = float(CHECKPOINT_JOBS[name].tags[MAX_RUNTIME_TAG])
    client = TabClient(base_url="http://unused")
    fetch = client.max_attempts * (client.timeout_seconds + client.retry_after_cap_seconds)
    if CHECKPOINTS[name].pre_race:
        waits = sum(calculate_delay(n, PRE_RACE_RETRY_POLICY.backoff, None, PRE_RACE_RETRY_POLICY.delay)
                    for n in range(1, PRE_RACE_RETRY_POLICY.max_retries + 1))
        assert bound == PRE_RACE_MAX_RUNTIME_SECONDS >= (PRE_RACE_RETRY_POLICY.max_retries + 1) * fetch + waits
        # Canceled at the bound (next monitoring poll, then the cancel timeout), a T-15 is re-requested before the jump.
        monitoring = yaml.safe_load((REPO_ROOT / "dagster.yaml").read_text())["run_monitoring"]
        worst = bound + 2 * monitoring["poll_interval_seconds"] + monitoring["cancel_timeout_seconds"]
        assert worst < -CHECKPOINTS["t15"].offset.total_seconds() - 120
    else:
        assert 2 * fetch <= bound < 3600


@pytest.mark.unit
@pytest.mark.parametrize(("name", "status", "refused"), [
    ("t60", "Open", False), ("t15", "Open", False), ("t15", None, False), ("t15", "Abandoned", False),
    ("t60", "Closed", True), ("t15", "Live", True), ("t15", "interim", True), ("t60", "FINAL", True),
    ("post", "Final", False), ("post", "Interim", False),
])
def test_fetched_odds_are_stored_as_pre_race_only_while_the_race_has_not_jumped(name, status, refused) -> None:
    # Abandoned races are handled on their own (ledger `abandoned`); a status missing from the event is not a jump.
    reason = no_longer_pre_race(CHECKPOINTS[name], status)
    assert (reason is not None) == refused
    if refused:
        assert f"status {status}" in reason and "not stored" in reason


class EventClock:
    """Simulated time that moves `step` forward on every /events request: attempt k sees base + k * step."""

    def __init__(self, base: dt.datetime, step: dt.timedelta) -> None:
        self.base, self.step, self.feed = base, step, None

    def __call__(self) -> dt.datetime:
        served = self.feed._counts["/events/{id}"] if self.feed is not None else 0  # noqa: SLF001 - test clock
        return self.base + self.step * served


def _server(clock, **config) -> SimFeedServer:
    server = SimFeedServer(SimFeedConfig(seed=7, **config), now=clock)
    if isinstance(clock, EventClock):
        clock.feed = server.feed
    return server.start()


def _client(server: SimFeedServer, **kw) -> TabClient:
    return TabClient(base_url=server.base_url, retry_backoff_seconds=0.01, timeout_seconds=5, **kw)


def _run(job_name, race_id, checkpoint, instance, client, race_db, delays=None, tags=None):
    config = checkpoint_run_config(race_id, checkpoint, "2026-11-29T00:00:00+00:00")
    if delays is not None:
        config["ops"]["check_race_result"]["config"]["retry_delays_seconds"] = delays
    return JOBS[checkpoint].execute_in_process(
        run_config=config, instance=instance, resources={"tab_client": client, "race_db": race_db},
        tags={"racing/race_id": race_id, **(tags or {})}, raise_on_error=False,
    )


def _seed(server: SimFeedServer, race_db, clock: Clock, countries=("NZ",)):
    at = clock.now
    clock.now = dt.datetime.combine(DAY, dt.time(6), tzinfo=dt.UTC) - dt.timedelta(hours=13)  # 06:00 NZ-ish
    seed_day(server.feed, race_db, DAY, countries=countries)
    clock.now = at


@dataclass(frozen=True)
class T60Run:
    meeting: object
    race: object
    result: dg.ExecuteInProcessResult
    odds: list
    ledger: sa.Row
    stored: sa.Row  # the race row after the run
    scrapes: int  # calls the run recorded


@contextmanager
def _claimed_race(race_db, checkpoint: str, before_start: dt.timedelta):
    """The feed serving DAY on a socket (its clock the test's), with one of its races' `checkpoint` claimed by the
    sensor, due `before_start` before the race's start: yields the clock, the server, the meeting and the race."""
    clock = Clock(dt.datetime(2026, 11, 29, tzinfo=dt.UTC))
    with _server(clock) as server:
        meeting, race = pick_race(server.feed.day(DAY))
        _seed(server, race_db, clock)
        with race_db.begin() as conn:
            claim_checkpoint(conn, race.race_id, checkpoint, race.scheduled_start - before_start)
        yield clock, server, meeting, race


def _t60_fetching_at(pg_instance, race_db, after_start: dt.timedelta) -> T60Run:
    """A sensor-claimed T-60 whose run fetches `after_start` from the race's start (the feed's clock)."""
    with _claimed_race(race_db, "t60", dt.timedelta(minutes=60)) as (clock, server, meeting, race):
        clock.now = race.scheduled_start + after_start
        result = _run("pre_race_t60", race.race_id, "t60", pg_instance, _client(server), race_db)
    with race_db.connect() as conn:
        scrapes = conn.execute(sa.text("SELECT count(*) FROM scrapes WHERE run_id = :r"), {"r": result.run_id}).scalar()
        return T60Run(meeting, race, result, odds_for_race(conn, race.race_id, "t60"),
                      checkpoint_row(conn, race.race_id, "t60"), race_row(conn, race.race_id), scrapes)


@pytest.mark.integration
def test_pre_race_snapshot_stores_one_row_per_runner(pg_instance, race_db) -> None:
    taken = _t60_fetching_at(pg_instance, race_db, -dt.timedelta(minutes=60))
    result, rows, ledger = taken.result, taken.odds, taken.ledger
    assert result.success
    assert len(rows) == len(taken.race.runners)
    assert all(r.fixed_win and r.pool_win and r.fixed_place for r in rows if not r.is_scratched)
    assert (ledger.state, ledger.run_id) == ("done", result.run_id)
    assert taken.scrapes == 1
    run = pg_instance.get_run_by_id(result.run_id)
    assert run.tags[TAG_OUTCOME] == "success" and run.tags["racing/meeting_id"] == taken.meeting.meeting_id
    assert run.tags["racing/checkpoint"] == "t60" and run.tags["orchestration/kind"] == "racing"


@pytest.mark.integration
def test_pre_race_run_that_fetches_after_the_jump_stores_no_odds_and_ends_skipped(pg_instance, race_db) -> None:
    # A T-60 run that started 63 minutes late (queued, or held by a dead worker): the feed says the race is off.
    late = _t60_fetching_at(pg_instance, race_db, dt.timedelta(minutes=3))
    assert not late.result.success
    assert late.odds == []
    assert (late.ledger.state, late.ledger.run_id) == ("skipped", late.result.run_id)
    note = late.ledger.note
    assert f"the race had started when the run fetched (status {late.stored.status})" in note, note
    assert late.stored.status in ("Closed", "Live", "Interim", "Final")  # what the feed said is kept
    assert late.scrapes == 1
    run = pg_instance.get_run_by_id(late.result.run_id)
    assert run.status == dg.DagsterRunStatus.FAILURE and run.tags[TAG_OUTCOME] == "failed"
    assert "odds no longer pre-race" in run.tags["racing/error"]


@pytest.mark.integration
def test_pre_race_t15_records_a_delayed_start(pg_instance, race_db) -> None:
    clock = Clock(dt.datetime(2026, 11, 29, tzinfo=dt.UTC))
    with _server(clock) as server:
        _, race = pick_race(server.feed.day(DAY), delayed=True)
        _seed(server, race_db, clock)
        clock.now = race.scheduled_start - dt.timedelta(minutes=9)  # the delay is announced 10 min before
        result = _run("pre_race_t15", race.race_id, "t15", pg_instance, _client(server), race_db)
        assert result.success
        with race_db.connect() as conn:
            row = race_row(conn, race.race_id)
        assert row.start_time == race.scheduled_start + race.delay
        assert row.previous_start_time == race.scheduled_start


@pytest.mark.integration
def test_transient_errors_retry_then_succeed_or_fail(pg_instance, race_db) -> None:
    clock = Clock(dt.datetime(2026, 11, 29, tzinfo=dt.UTC))
    with _server(clock) as server:
        _, race = pick_race(server.feed.day(DAY))
        _seed(server, race_db, clock)
        clock.now = race.scheduled_start - dt.timedelta(minutes=15)
        client = _client(server, max_attempts=1)
        server.feed.queue_faults("5xx", "5xx")
        ok = _run("pre_race_t15", race.race_id, "t15", pg_instance, client, race_db)
        assert ok.success
        assert sum(e.event_type_value == "STEP_UP_FOR_RETRY" for e in ok.all_events) == 2
        server.feed.queue_faults("5xx", "5xx", "5xx")
        failed = _run("pre_race_t15", race.race_id, "t15", pg_instance, client, race_db)
        assert not failed.success
        run = pg_instance.get_run_by_id(failed.run_id)
        assert run.tags[TAG_OUTCOME] == "failed" and "503" in run.tags["racing/error"]


def _chain(race, pg_instance, race_db, client, monkeypatch, delays=(0.05, 0.05, 0.1)):
    """Run attempt 0 as the T+5 sensor would, then, while the ledger says waiting_final, tick the post-race sensor
    with its clock just inside the launch-ahead margin of next_attempt_at and run what it requests (the run waits
    for next_attempt_at itself): the chain with no run waiting in between."""
    ahead = launch_ahead()
    with race_db.begin() as conn:
        claim_checkpoint(conn, race.race_id, "post", race.jump() + dt.timedelta(minutes=5))
    results = [_run("post_race_t5", race.race_id, "post", pg_instance, client, race_db, list(delays))]
    requests = []
    while True:
        with race_db.connect() as conn:
            ledger = checkpoint_row(conn, race.race_id, "post")
        if ledger.state != "waiting_final":
            return results, requests, ledger
        assert ledger.run_id == results[-1].run_id and ledger.attempt == len(results) - 1
        monkeypatch.setattr(sensors, "sensor_now", lambda: ledger.next_attempt_at - ahead - dt.timedelta(seconds=1))
        with dg.build_sensor_context(instance=pg_instance, resources={"race_db": race_db}) as context:
            early = sensors.post_race_t5_sensor(context)
        assert not [r for r in getattr(early, "run_requests", None) or [] if r.tags["racing/race_id"] == race.race_id]
        monkeypatch.setattr(sensors, "sensor_now", lambda: ledger.next_attempt_at - ahead + dt.timedelta(seconds=1))
        with dg.build_sensor_context(instance=pg_instance, resources={"race_db": race_db}) as context:
            tick = sensors.post_race_t5_sensor(context)
        [request] = [r for r in tick.run_requests if r.tags["racing/race_id"] == race.race_id]
        requests.append(request)
        config = request.run_config
        config["ops"]["check_race_result"]["config"]["retry_delays_seconds"] = list(delays)
        results.append(JOBS["post"].execute_in_process(
            run_config=config, instance=pg_instance, resources={"tab_client": client, "race_db": race_db},
            tags=request.tags, raise_on_error=False))


def _assert_chain_audit(pg_instance, results, requests, race_id) -> None:
    for n, (request, result) in enumerate(zip(requests, results[1:], strict=True), start=1):
        assert request.run_key == f"{race_id}:post:{n}"
        assert request.tags["racing/previous_run_id"] == results[n - 1].run_id
        assert pg_instance.get_run_by_id(result.run_id).tags["racing/attempt"] == str(n)
    for result in results:
        assert result.success
        assert not any(e.event_type_value == "STEP_UP_FOR_RETRY" for e in result.all_events)  # nobody waits in a run
    for result in results[:-1]:
        tags = pg_instance.get_run_by_id(result.run_id).tags
        assert tags["racing/awaiting_final"] == "true" and tags[TAG_OUTCOME] == "success"
    awaiting = pg_instance.get_runs(dg.RunsFilter(tags={"racing/awaiting_final": "true"}))  # filterable
    assert {r.run_id for r in awaiting} == {r.run_id for r in results[:-1]}


@pytest.mark.integration
def test_post_race_interim_then_final_across_the_chain(pg_instance, race_db, monkeypatch) -> None:
    seed_clock = Clock(dt.datetime(2026, 11, 29, tzinfo=dt.UTC))
    with _server(seed_clock) as seeder:
        _, race = pick_race(seeder.feed.day(DAY))
        _seed(seeder, race_db, seed_clock)
    jump = race.jump()
    clock = EventClock(jump + dt.timedelta(seconds=30), dt.timedelta(seconds=60))
    # Attempts see jump+90 s, +150 s (Interim), +210 s (Final).
    with _server(clock, interim_after_seconds=60, final_after_seconds=200) as server:
        results, requests, ledger = _chain(race, pg_instance, race_db, _client(server), monkeypatch)
        assert len(results) == 3
        _assert_chain_audit(pg_instance, results, requests, race.race_id)
        assert results[-1].output_for_node("check_race_result")["outcome"] == "final"
        assert (ledger.state, ledger.attempt, ledger.run_id) == ("done", 2, results[-1].run_id)
        assert ledger.previous_run_id == results[1].run_id
        with race_db.connect() as conn:
            stored = results_for_race(conn, race.race_id)
            final = final_dividends(conn, race.race_id)
            interim = dividends_for_race(conn, race.race_id, status="Interim")
        assert stored and not any(r.is_provisional for r in stored)
        assert [r.runner_number for r in stored][:3] == list(race.finish_order[:3])
        assert final and all(d.status == "Final" for d in final)
        assert interim  # stored while Interim, kept apart from the Final set
        assert not {d.dividend_id for d in final} & {d.dividend_id for d in interim}
        assert pg_instance.get_run_by_id(results[-1].run_id).tags[TAG_OUTCOME] == "success"


@pytest.mark.integration
def test_post_race_still_interim_after_the_chain_ends_partial(pg_instance, race_db, monkeypatch) -> None:
    seed_clock = Clock(dt.datetime(2026, 11, 29, tzinfo=dt.UTC))
    with _server(seed_clock) as seeder:
        _, race = pick_race(seeder.feed.day(DAY))
        _seed(seeder, race_db, seed_clock)
    clock = EventClock(race.jump() + dt.timedelta(seconds=30), dt.timedelta(seconds=60))
    with _server(clock, interim_after_seconds=60, final_after_seconds=3600) as server:
        results, requests, ledger = _chain(race, pg_instance, race_db, _client(server), monkeypatch)
        assert len(results) == 4
        _assert_chain_audit(pg_instance, results, requests, race.race_id)
        with race_db.connect() as conn:
            stored = results_for_race(conn, race.race_id)
            final = final_dividends(conn, race.race_id)
        assert stored and all(r.is_provisional for r in stored)
        assert final == []
        assert (ledger.state, ledger.attempt) == ("provisional", 3)
        run = pg_instance.get_run_by_id(results[-1].run_id)
        assert run.status == dg.DagsterRunStatus.SUCCESS
        assert run.tags[TAG_OUTCOME] == "partial" and run.tags["racing/provisional"] == "true"
        assert "still Interim after 4 checks" in run.tags["racing/error"]


@pytest.mark.integration
def test_post_race_abandoned_marks_and_stops(pg_instance, race_db) -> None:
    clock = Clock(dt.datetime(2026, 11, 29, tzinfo=dt.UTC))
    with _server(clock) as server:
        _, race = pick_race(server.feed.day(DAY), abandoned=True, countries=("NZ", "AUS"))
        _seed(server, race_db, clock, countries=("NZ", "AUS"))
        clock.now = race.scheduled_start + dt.timedelta(minutes=5)
        result = _run("post_race_t5", race.race_id, "post", pg_instance, _client(server), race_db, [0.05, 0.05, 0.1])
        assert result.success
        assert not any(e.event_type_value == "STEP_UP_FOR_RETRY" for e in result.all_events)
        with race_db.connect() as conn:
            assert race_row(conn, race.race_id).status == "Abandoned"
            assert results_for_race(conn, race.race_id) == []


@pytest.mark.integration
def test_unknown_race_fails_clearly_without_retries(pg_instance, race_db, sim_feed) -> None:
    result = _run("pre_race_t60", "no-such-race", "t60", pg_instance, _client(sim_feed), race_db)
    assert not result.success
    assert not any(e.event_type_value == "STEP_UP_FOR_RETRY" for e in result.all_events)
    assert "404" in pg_instance.get_run_by_id(result.run_id).tags["racing/error"]


@pytest.mark.integration
@pytest.mark.parametrize(("run_key", "takes_it"), [
    ("{race}:t15", False),  # the first request, e.g. Dagster's run retry of its failed run (retries copy the key)
    ("{race}:t15:retry1", True),  # the sensor's re-request, which the ledger now names
    (None, True),  # a run outside the sensors (no run key): as before, it takes the row
])
def test_a_checkpoint_requested_again_is_taken_only_under_the_key_the_ledger_names(pg_instance, race_db, run_key,
                                                                                    takes_it) -> None:
    # The fault: a T-15's first run failed at start; two minutes later the sensor re-requested it as `:retry1` and, one
    # second after, Dagster's run retry of the first run arrived with the first key. Both fetched: taken twice.
    with _claimed_race(race_db, "t15", dt.timedelta(minutes=15)) as (clock, server, _, race):
        with race_db.begin() as conn:
            record_relaunch(conn, race.race_id, "t15", run_key=f"{race.race_id}:t15:retry1", note="run failed",
                            now=clock.now)
        clock.now = race.scheduled_start - dt.timedelta(minutes=15)
        tags = {} if run_key is None else {RUN_KEY_TAG: run_key.format(race=race.race_id)}
        result = _run("pre_race_t15", race.race_id, "t15", pg_instance, _client(server), race_db, tags=tags)
        fetched = server.feed._counts["/events/{id}"]  # noqa: SLF001 - what the run asked the feed
    assert result.success
    with race_db.connect() as conn:
        odds, ledger = odds_for_race(conn, race.race_id, "t15"), checkpoint_row(conn, race.race_id, "t15")
    run = pg_instance.get_run_by_id(result.run_id)
    if takes_it:
        assert (ledger.state, ledger.run_id, fetched) == ("done", result.run_id, 1)
        assert len(odds) == len(race.runners)
        assert TAG_SUPERSEDED not in run.tags
    else:
        assert (ledger.state, ledger.run_id, ledger.run_key, fetched) == (
            "requested", None, f"{race.race_id}:t15:retry1", 0)
        assert odds == []
        assert run.tags[TAG_SUPERSEDED] == f"{race.race_id}:t15:retry1"
        assert run.tags[TAG_OUTCOME] == "success" and run.tags["racing/items_processed"] == "0"


@pytest.mark.integration
@pytest.mark.parametrize("state", ["done", "abandoned", "skipped"])
def test_a_run_retry_of_a_finished_checkpoint_stands_down(pg_instance, race_db, state) -> None:
    # The fault: a T-15's run committed its odds and its `done`, then failed to record its own success (Postgres
    # went down); Dagster's run retry, with the same run key, took the finished checkpoint again and overwrote its
    # ledger row, so the ledger named a run whose odds were not the ones stored.
    with _claimed_race(race_db, "t15", dt.timedelta(minutes=15)) as (clock, server, _, race):
        key = f"{race.race_id}:t15"
        with race_db.begin() as conn:
            conn.execute(sa.text("UPDATE race_checkpoints SET state = :s, run_id = 'first-run', run_key = :k, "
                                 "note = 'what the first run said' WHERE race_id = :r AND checkpoint = 't15'"),
                         {"s": state, "k": key, "r": race.race_id})
        clock.now = race.scheduled_start - dt.timedelta(minutes=15)
        result = _run("pre_race_t15", race.race_id, "t15", pg_instance, _client(server), race_db,
                      tags={RUN_KEY_TAG: key})
        fetched = server.feed._counts["/events/{id}"]  # noqa: SLF001 - what the run asked the feed
    assert result.success
    with race_db.connect() as conn:
        odds, ledger = odds_for_race(conn, race.race_id, "t15"), checkpoint_row(conn, race.race_id, "t15")
    assert (ledger.state, ledger.run_id, ledger.note, fetched, odds) == (
        state, "first-run", "what the first run said", 0, [])
    run = pg_instance.get_run_by_id(result.run_id)
    assert run.tags[TAG_SUPERSEDED] == "first-run"
    assert run.tags[TAG_OUTCOME] == "success" and run.tags["racing/items_processed"] == "0"


@pytest.fixture
def ledger_write_fails(race_db):
    """Postgres refuses the ledger's move to a finished state, as when it goes down between two statements."""
    with race_db.begin() as conn:
        conn.execute(sa.text(
            "CREATE FUNCTION refuse_finish() RETURNS trigger AS $$ BEGIN "
            "RAISE EXCEPTION 'the database went away'; END $$ LANGUAGE plpgsql; "
            "CREATE TRIGGER refuse_finish BEFORE UPDATE ON race_checkpoints FOR EACH ROW "
            "WHEN (NEW.state IN ('done', 'abandoned')) EXECUTE FUNCTION refuse_finish()"))


@pytest.mark.integration
@pytest.mark.parametrize("checkpoint", ["t15", "post"])
def test_what_a_checkpoint_stores_commits_with_its_done_or_not_at_all(pg_instance, race_db, ledger_write_fails,
                                                                      checkpoint) -> None:
    # Odds or Final results committed while the ledger still says `running` are data no run owns: the run fails, the
    # sensor re-requests the checkpoint, and a later run's fetch (or skip) leaves the ledger disagreeing with the rows.
    at = {"t15": -dt.timedelta(minutes=15), "post": dt.timedelta(minutes=30)}[checkpoint]
    with _claimed_race(race_db, checkpoint, -at) as (clock, server, _, race):
        clock.now = race.scheduled_start + at
        result = _run(JOBS[checkpoint].name, race.race_id, checkpoint, pg_instance, _client(server), race_db)
    assert not result.success
    with race_db.connect() as conn:
        ledger = checkpoint_row(conn, race.race_id, checkpoint)
        stored = (odds_for_race(conn, race.race_id, "t15") if checkpoint == "t15"
                  else results_for_race(conn, race.race_id))
    assert (ledger.state, ledger.run_id, stored) == ("running", result.run_id, [])
