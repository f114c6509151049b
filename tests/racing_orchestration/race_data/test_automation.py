"""Declarative automation: a recent racing day's market_movers and race_day_export are requested once that day's
snapshots and results arrive (recorded by the real checkpoint runs), once per sensor evaluation however many arrived,
and never for an old day; evaluated by Dagster's automation engine on a real instance on Postgres."""

import datetime as dt
from zoneinfo import ZoneInfo

import dagster as dg
import pytest

from racing_orchestration.checkpoints.jobs import build_checkpoint_jobs, checkpoint_run_config
from racing_orchestration.definitions import defs
from racing_orchestration.race_data.catalog import MARKET_MOVERS, ODDS_T60, RACE_DAY_EXPORT
from racing_orchestration.settings import DEFAULT_DATA_REFRESH_SECONDS
from racing_orchestration.tab.client import TabClient
from racing_orchestration.tab.sim_engine import SimFeedConfig
from racing_orchestration.tab.sim_feed import SimFeedServer
from tests.racing_orchestration.checkpoint_support import Clock, seed_day

NZ = ZoneInfo("Pacific/Auckland")
DAY = dt.date(2026, 11, 29)
EVALUATED_AT = dt.datetime.combine(DAY, dt.time(15, 0), NZ)  # mid-afternoon of the racing day
JOBS = build_checkpoint_jobs(dg.RetryPolicy(max_retries=2, delay=0.05))
AUTOMATED = {MARKET_MOVERS, RACE_DAY_EXPORT}


@pytest.mark.unit
def test_the_sensor_targets_the_derived_assets_and_runs_by_default() -> None:
    sensor = defs.resolve_sensor_def("race_data_automation")
    assert isinstance(sensor, dg.AutomationConditionSensorDefinition)
    assert sensor.default_status == dg.DefaultSensorStatus.RUNNING
    assert sensor.minimum_interval_seconds == DEFAULT_DATA_REFRESH_SECONDS == 300
    graph = defs.resolve_asset_graph()
    assert sensor.asset_selection.resolve(graph) == AUTOMATED
    for key in AUTOMATED:
        assert graph.get(key).automation_condition is not None
    for key in graph.get_all_asset_keys() - AUTOMATED:  # only these two are automated
        assert graph.get(key).automation_condition is None, key
    assert sensor.run_tags == {"orchestration/kind": "racing"}


def _requested(result) -> dict[str, set[str]]:
    return {key.to_user_string(): set(result.get_requested_partitions(key)) for key in AUTOMATED
            if result.get_num_requested(key)}


class Day:
    """The simulated feed at a racing day, and checkpoint runs of its races recorded on the test's instance."""

    def __init__(self, instance, race_db, server: SimFeedServer, clock: Clock, day: dt.date) -> None:
        self.instance, self.race_db, self.server, self.clock = instance, race_db, server, clock
        seed_day(server.feed, race_db, day, countries=("NZ",))
        self.races = [r for m in server.feed.day(day) if m.country == "NZ" for r in m.races if r.abandoned_at is None]

    def snapshot(self, checkpoint: str, race) -> None:
        minutes = {"t60": 60, "t15": 15}[checkpoint]
        self.clock.now = race.scheduled_start - dt.timedelta(minutes=minutes)
        client = TabClient(base_url=self.server.base_url, retry_backoff_seconds=0.01, timeout_seconds=5)
        result = JOBS[checkpoint].execute_in_process(
            run_config=checkpoint_run_config(race.race_id, checkpoint), instance=self.instance,
            resources={"tab_client": client, "race_db": self.race_db}, tags={"racing/race_id": race.race_id})
        assert result.success


@pytest.mark.integration
def test_snapshots_arriving_bring_the_days_movers_and_export_up_to_date_once_per_evaluation(pg_instance,
                                                                                          race_db) -> None:
    clock = Clock(dt.datetime(2026, 11, 28, 17, tzinfo=dt.UTC))
    with SimFeedServer(SimFeedConfig(seed=7), now=clock).start() as server:
        day = Day(pg_instance, race_db, server, clock, DAY)
        first = dg.evaluate_automation_conditions(defs, pg_instance, evaluation_time=EVALUATED_AT)
        assert _requested(first) == {}  # nothing arrived yet

        day.snapshot("t60", day.races[0])
        arrived = dg.evaluate_automation_conditions(defs, pg_instance, evaluation_time=EVALUATED_AT,
                                                    cursor=first.cursor)
        assert _requested(arrived) == {"market_movers": {str(DAY)}, "race_day_export": {str(DAY)}}

        quiet = dg.evaluate_automation_conditions(defs, pg_instance, evaluation_time=EVALUATED_AT,
                                                  cursor=arrived.cursor)
        assert _requested(quiet) == {}  # no new data, no rerun

        for race in day.races[1:4]:  # three more snapshots before the next evaluation: one request, not three
            day.snapshot("t15", race)
        batched = dg.evaluate_automation_conditions(defs, pg_instance, evaluation_time=EVALUATED_AT,
                                                    cursor=quiet.cursor)
        assert _requested(batched) == {"market_movers": {str(DAY)}, "race_day_export": {str(DAY)}}
        assert batched.get_num_requested(MARKET_MOVERS) == 1


@pytest.mark.integration
@pytest.mark.parametrize(("offset_days", "requested"), [
    (-2, False),  # the day before yesterday: left to backfills
    (-1, True),  # the three days back from the end of tomorrow (the latest window) are tomorrow, today, yesterday
    (0, True),
    (1, True),
])
def test_yesterday_today_and_tomorrow_are_kept_up_to_date_and_older_days_left_to_backfills(
        offset_days, requested, pg_instance, race_db) -> None:
    day_of_data = DAY + dt.timedelta(days=offset_days)
    clock = Clock(dt.datetime.combine(day_of_data, dt.time(), dt.UTC) - dt.timedelta(hours=7))
    with SimFeedServer(SimFeedConfig(seed=7), now=clock).start() as server:
        day = Day(pg_instance, race_db, server, clock, day_of_data)
        first = dg.evaluate_automation_conditions(defs, pg_instance, evaluation_time=EVALUATED_AT)
        day.snapshot("t60", day.races[0])
        later = dg.evaluate_automation_conditions(defs, pg_instance, evaluation_time=EVALUATED_AT,
                                                  cursor=first.cursor)
    # The day's data did arrive (its snapshot is on record as a materialization of that day): for an old day, an
    # empty request would also follow from nothing recorded at all.
    recorded = pg_instance.fetch_materializations(ODDS_T60, limit=10).records
    assert [r.asset_materialization.partition for r in recorded] == [day_of_data.isoformat()]
    both = {"market_movers": {str(day_of_data)}, "race_day_export": {str(day_of_data)}}
    assert _requested(later) == (both if requested else {})


@pytest.mark.integration
@pytest.mark.parametrize("export_materialized_meanwhile", [False, True])
def test_data_arriving_just_after_a_request_is_not_lost(export_materialized_meanwhile, pg_instance, race_db) -> None:
    """The last snapshot or result of a day often lands after the evaluation that requested the day's export (and
    while that run writes it): the next evaluation must request the day again, or the export misses it for good."""
    clock = Clock(dt.datetime(2026, 11, 28, 17, tzinfo=dt.UTC))
    with SimFeedServer(SimFeedConfig(seed=7), now=clock).start() as server:
        day = Day(pg_instance, race_db, server, clock, DAY)
        first = dg.evaluate_automation_conditions(defs, pg_instance, evaluation_time=EVALUATED_AT)
        day.snapshot("t15", day.races[0])
        requested = dg.evaluate_automation_conditions(defs, pg_instance, evaluation_time=EVALUATED_AT,
                                                      cursor=first.cursor)
        assert _requested(requested) == {"market_movers": {str(DAY)}, "race_day_export": {str(DAY)}}
        if export_materialized_meanwhile:  # the requested run ends before the last snapshot lands
            for key in AUTOMATED:
                pg_instance.report_runless_asset_event(dg.AssetMaterialization(key, partition=str(DAY)))
        day.snapshot("t15", day.races[1])  # the day's last snapshot, after the request
        after = dg.evaluate_automation_conditions(defs, pg_instance, evaluation_time=EVALUATED_AT,
                                                  cursor=requested.cursor)
        assert _requested(after) == {"market_movers": {str(DAY)}, "race_day_export": {str(DAY)}}
        settled = dg.evaluate_automation_conditions(defs, pg_instance, evaluation_time=EVALUATED_AT,
                                                    cursor=after.cursor)
        assert _requested(settled) == {}  # and once only
