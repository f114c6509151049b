"""card_refresh: races added or re-timed in the feed after the morning scrape reach the race database through the
real job, and the checkpoint sensors then request their checkpoints at the new times."""

import dataclasses
import datetime as dt

import dagster as dg
import pytest
import sqlalchemy as sa

from racing_orchestration.checkpoints import sensors
from racing_orchestration.ingestion.card_refresh import (
    CARD_REFRESH_CRON,
    card_refresh,
    card_refresh_schedule,
    refresh_skip_reason,
)
from racing_orchestration.tab.client import TabClient
from racing_orchestration.tab.sim_engine import SimFeedConfig
from racing_orchestration.tab.sim_feed import SimFeedServer
from tests.racing_orchestration.checkpoint_support import Clock, pick_race, seed_day

DAY = dt.date(2026, 11, 29)
MORNING = dt.datetime(2026, 11, 28, 17, 0, tzinfo=dt.UTC)  # 06:00 NZDT on the 29th
NOON = dt.datetime(2026, 11, 28, 23, 0, tzinfo=dt.UTC)


@pytest.mark.unit
@pytest.mark.parametrize(
    ("last_start", "skipped"),
    [(None, False), (NOON + dt.timedelta(minutes=1), False), (NOON, True), (NOON - dt.timedelta(hours=3), True)],
)
def test_refresh_runs_until_the_last_race_has_started(last_start, skipped) -> None:
    reason = refresh_skip_reason(last_start, NOON)
    assert (reason is not None) is skipped
    if skipped:
        assert "last stored race started at" in reason


def _tick(sensor, instance, race_db) -> list[dg.RunRequest]:
    with dg.build_sensor_context(instance=instance, resources={"race_db": race_db}) as context:
        result = sensor(context)
    return list(result.run_requests or []) if isinstance(result, dg.SensorResult) else []


@pytest.mark.integration
def test_races_added_or_re_timed_after_the_scrape_get_their_checkpoints(pg_instance, race_db, monkeypatch) -> None:
    clock = Clock(MORNING)
    monkeypatch.setattr(sensors, "sensor_now", clock)
    with SimFeedServer(SimFeedConfig(seed=7), now=clock) as server:
        feed = server.feed
        seed_day(feed, race_db, DAY, countries=("NZ",))  # what the 06:00 scrape stored

        # After the scrape TAB adds a race at the end of a meeting and moves another race 45 minutes later.
        meetings = feed.day(DAY)
        meeting, moved = pick_race(meetings)
        later = max(meeting.races, key=lambda r: r.number)
        added = dataclasses.replace(later, race_id="00000000-0000-4000-8000-0000000000ad", number=later.number + 1,
                                    name="ADDED AFTER THE SCRAPE", scheduled_start=later.scheduled_start + dt.timedelta(minutes=30))
        old_start = moved.scheduled_start
        retimed = dataclasses.replace(moved, scheduled_start=old_start + dt.timedelta(minutes=45))
        races = tuple(retimed if r.race_id == moved.race_id else r for r in meeting.races) + (added,)
        meetings[meetings.index(meeting)] = dataclasses.replace(meeting, races=races)
        with race_db.connect() as conn:
            stored = dict(conn.execute(sa.text("SELECT race_id, start_time FROM races")).all())
        assert added.race_id not in stored and stored[moved.race_id] == old_start

        # The 07:00 refresh, the real job (its schedule's run config) against the feed over HTTP.
        clock.now = MORNING + dt.timedelta(hours=1)
        with dg.build_schedule_context(scheduled_execution_time=clock.now, resources={"race_db": race_db}) as context:
            request = card_refresh_schedule.evaluate_tick(context).run_requests[0]
        # 07:00 in Auckland is 18:00 UTC the day before: the refresh is for the NZ date, today only, each fetched once.
        assert request.run_config == {"ops": {
            "plan_scrape_combinations": {"config": {"dates": ["2026-11-29"], "days_ahead": 0}},
            "scrape_combination": {"config": {"max_retries": 0}}}}
        client = TabClient(base_url=server.base_url, retry_backoff_seconds=0.01)
        result = card_refresh.execute_in_process(run_config=request.run_config, instance=pg_instance, tags=request.tags,
                                                 resources={"tab_client": client, "race_db": race_db})
        assert result.success
        summary = result.output_for_node("summarize_scrape")
        # Today's combinations only (T, H, G x NZ, AUS), one call each: the refresh's whole cost.
        assert summary["combinations"] == 6 and summary["api_requests"] == 6
    with race_db.connect() as conn:
        rows = {r.race_id: r for r in conn.execute(sa.text(
            "SELECT race_id, start_time, previous_start_time FROM races WHERE race_id IN (:a, :m)"),
            {"a": added.race_id, "m": moved.race_id})}
    assert rows[added.race_id].start_time == added.scheduled_start
    assert (rows[moved.race_id].start_time, rows[moved.race_id].previous_start_time) == (retimed.scheduled_start, old_start)

    # The T-60 sensor: nothing for the moved race at its old T-60; each race requested at its new T-60.
    t60 = sensors.CHECKPOINT_SENSORS["t60"]
    clock.now = old_start - dt.timedelta(minutes=60)
    assert moved.race_id not in {r.tags["racing/race_id"] for r in _tick(t60, pg_instance, race_db)}
    for race in (retimed, added):
        clock.now = race.scheduled_start - dt.timedelta(minutes=60)
        requested = {r.tags["racing/race_id"]: r for r in _tick(t60, pg_instance, race_db)}
        assert race.race_id in requested, race.name
        assert requested[race.race_id].run_key == f"{race.race_id}:t60"
        assert requested[race.race_id].tags["racing/scheduled_for"] == (
            race.scheduled_start - dt.timedelta(minutes=60)).isoformat()


@pytest.mark.integration
def test_schedule_skips_once_the_last_race_started(race_db) -> None:
    assert CARD_REFRESH_CRON == "*/30 7-23 * * *"
    assert card_refresh_schedule.execution_timezone == "Pacific/Auckland"
    assert card_refresh_schedule.default_status == dg.DefaultScheduleStatus.RUNNING
    with SimFeedServer(SimFeedConfig(seed=7), now=lambda: MORNING) as server:
        seed_day(server.feed, race_db, DAY, countries=("NZ",))
        last = max(r.scheduled_start for m in server.feed.day(DAY) if m.country == "NZ" for r in m.races)
    for when, runs in ((last - dt.timedelta(minutes=30), True), (last + dt.timedelta(minutes=1), False)):
        with dg.build_schedule_context(scheduled_execution_time=when, resources={"race_db": race_db}) as context:
            data = card_refresh_schedule.evaluate_tick(context)
        assert bool(data.run_requests) is runs, when
        if runs:
            assert dg.validate_run_config(card_refresh, data.run_requests[0].run_config)
        else:
            assert "last stored race started" in data.skip_message


@pytest.mark.unit
def test_a_refresh_launched_without_config_fetches_today_once() -> None:
    ops = dg.validate_run_config(card_refresh)["ops"]
    assert (ops["plan_scrape_combinations"]["config"]["dates"], ops["plan_scrape_combinations"]["config"]["days_ahead"]) == ([], 0)
    assert ops["scrape_combination"]["config"]["max_retries"] == 0


@pytest.mark.unit
def test_refreshes_alert_on_a_change_of_outcome_not_every_30_minutes() -> None:
    # The alert sensors read this run tag (tests/orchestration_core/audit/test_alerts.py drives them with it).
    assert card_refresh.tags["orchestration/alerts"] == "on_change"
