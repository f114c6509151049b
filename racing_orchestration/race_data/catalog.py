"""The racing assets, their daily partitions and lineage, and the materializations the runs that store data record.

    race_cards ──┬── odds_t60 ──┬── market_movers
                 ├── odds_t15 ──┤
                 └── race_results ┴── racing_day, race_day_export (both also read race_cards)

A partition is a racing day: TAB's date of a meeting (`meetings.meeting_date`), which for NZ and Australian meetings
is their local date and for overseas meetings TAB's day label (a US evening meeting of the 16th is listed on the
17th), read in RACING_TIMEZONE's calendar. Every run that stores data records a materialization of the day it stored
(the morning scrape, each card refresh, each checkpoint run, each post-race attempt), with what it stored, so the
catalog shows when each day's data arrived and from which run. `odds_t60`, `odds_t15` and `race_results` are only
ever stored by those race-time runs (a past T-60 cannot be taken again), so Dagster does not materialize them itself.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Mapping

import dagster as dg

from orchestration_core.settings import racing_timezone

FIRST_RACING_DAY = "2025-01-01"
# A daily partition exists once its day is over; end_offset=2 adds today (racing now) and tomorrow (its card is
# published today, and the morning scrape stores it too).
racing_days = dg.DailyPartitionsDefinition(start_date=FIRST_RACING_DAY, timezone=racing_timezone(), end_offset=2)

RACE_CARDS = dg.AssetKey("race_cards")
ODDS_T60 = dg.AssetKey("odds_t60")
ODDS_T15 = dg.AssetKey("odds_t15")
RACE_RESULTS = dg.AssetKey("race_results")
MARKET_MOVERS = dg.AssetKey("market_movers")
RACING_DAY = dg.AssetKey("racing_day")
RACE_DAY_EXPORT = dg.AssetKey("race_day_export")
ODDS_BY_CHECKPOINT = {"t60": ODDS_T60, "t15": ODDS_T15}
GROUP = "racing"

_SNAPSHOT_DESCRIPTION = (
    "Fixed and pool odds of every runner at {label} (one row per runner in odds_snapshots), the runners and their "
    "scratchings, and any start-time change: stored by each {job} run, one race at a time. Materialized by those "
    "runs only: a past {label} cannot be taken again."
)
odds_t60 = dg.AssetSpec(
    ODDS_T60, deps=[RACE_CARDS], partitions_def=racing_days, group_name=GROUP, kinds={"postgres"},
    description=_SNAPSHOT_DESCRIPTION.format(label="T-60", job="pre_race_t60"),
)
odds_t15 = dg.AssetSpec(
    ODDS_T15, deps=[RACE_CARDS], partitions_def=racing_days, group_name=GROUP, kinds={"postgres"},
    description=_SNAPSHOT_DESCRIPTION.format(label="T-15", job="pre_race_t15"),
)
race_results = dg.AssetSpec(
    RACE_RESULTS, deps=[RACE_CARDS], partitions_def=racing_days, group_name=GROUP, kinds={"postgres"},
    description="Results (finishing positions, provisional until Final) and dividends (Interim and Final) of each "
    "race: stored by each post_race_t5 attempt (T+5, then 5, 5 and 10 minutes later until Final). Materialized by "
    "those runs only.",
)
RACE_TIME_ASSETS = (odds_t60, odds_t15, race_results)


def racing_day_key(day: dt.date) -> str | None:
    """The partition key of `day`, or None when the day is outside the partitions (before FIRST_RACING_DAY or after
    tomorrow in RACING_TIMEZONE): its data is stored, but the catalog has no partition to show it under."""
    key = day.isoformat()
    return key if racing_days.has_partition_key(key) else None


def race_materialization(asset_key: dg.AssetKey, race: object, description: str,
                         metadata: Mapping[str, object]) -> dg.AssetMaterialization | None:
    """What one race-time run stored, as a materialization of the race's racing day (`race` is a `race_row`)."""
    partition = racing_day_key(race.meeting_date)
    if partition is None:
        return None
    return dg.AssetMaterialization(
        asset_key=asset_key,
        partition=partition,
        description=description,
        metadata={
            "race_id": race.race_id,
            "meeting": race.meeting_name,
            "race_number": race.race_number,
            "start_time": dg.MetadataValue.timestamp(race.start_time),
            **metadata,
        },
    )


def log_materialization(context: dg.OpExecutionContext, event: dg.AssetMaterialization | None, what: str) -> None:
    """Record `event` in the run's event log; a day outside the partitions is only logged (its data is stored)."""
    if event is None:
        context.log.warning(f"{what}: stored, but its racing day is outside the partitions of the asset catalog "
                            f"({FIRST_RACING_DAY} to tomorrow in RACING_TIMEZONE); no materialization recorded")
        return
    context.log_event(event)
