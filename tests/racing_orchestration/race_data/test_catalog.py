"""The asset catalog as declared: the racing assets, their daily partitions in RACING_TIMEZONE, and their lineage."""

import datetime as dt
from zoneinfo import ZoneInfo

import dagster as dg
import pytest

from racing_orchestration.definitions import defs

pytestmark = pytest.mark.unit

LINEAGE = {
    "race_cards": set(),
    "odds_t60": {"race_cards"},
    "odds_t15": {"race_cards"},
    "race_results": {"race_cards"},
    "market_movers": {"odds_t60", "odds_t15", "race_results"},
    "racing_day": {"race_cards", "odds_t60", "odds_t15", "race_results"},
}


def _graph():
    return defs.resolve_asset_graph()


@pytest.mark.parametrize(("asset", "parents"), sorted(LINEAGE.items()))
def test_lineage_as_declared(asset: str, parents: set[str]) -> None:
    node = _graph().get(dg.AssetKey(asset))
    assert {key.to_user_string() for key in node.parent_keys} == parents


def test_every_racing_asset_is_one_daily_partition_per_racing_day() -> None:
    graph = _graph()
    partitions = {graph.get(dg.AssetKey(name)).partitions_def for name in LINEAGE}
    [days] = partitions
    assert isinstance(days, dg.TimeWindowPartitionsDefinition)
    assert days.cron_schedule == "0 0 * * *" and days.timezone == "Pacific/Auckland"


def test_the_partitions_reach_tomorrow_whose_card_the_morning_scrape_stores() -> None:
    from racing_orchestration.race_data.catalog import racing_day_key

    today = dt.datetime.now(ZoneInfo("Pacific/Auckland")).date()
    assert racing_day_key(today + dt.timedelta(days=1)) == str(today + dt.timedelta(days=1))
    assert racing_day_key(today + dt.timedelta(days=2)) is None
    assert racing_day_key(dt.date(2024, 12, 31)) is None  # before the first racing day


@pytest.mark.parametrize("asset", ["odds_t60", "odds_t15", "race_results"])
def test_race_time_data_is_recorded_by_the_runs_not_materialized_by_dagster(asset: str) -> None:
    assert not _graph().get(dg.AssetKey(asset)).is_executable
