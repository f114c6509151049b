"""`market_movers`: the day's fixed-win price moves from T-60 to T-15 with the finish, as a daily-partitioned asset.

The rows are computed in plain Python (checkpoints/movers_rows.py) and the metadata's table is rendered by tabulate.
"""

import datetime as dt
from typing import Any

import dagster as dg
import sqlalchemy as sa
from tabulate import tabulate

from orchestration_core.run_outcome import Outcome, record_outcome
from racing_orchestration.checkpoints.movers_rows import biggest_movers, market_movers_rows
from racing_orchestration.race_data.automation import recent_day_data_arrived
from racing_orchestration.race_data.catalog import GROUP, ODDS_T15, ODDS_T60, RACE_RESULTS, racing_days
from racing_orchestration.race_data.freshness import DAILY_DERIVED_FRESHNESS
from racing_orchestration.race_db import schema
from racing_orchestration.race_db.movers import upsert_market_movers
from racing_orchestration.race_db.resource import RaceDatabase


def _day_rows(conn: sa.Connection, day: dt.date) -> tuple[list[Any], list[Any], list[Any]]:
    """The day's T-60/T-15 odds, results and races, as row mappings."""
    races = sa.select(schema.races.c.race_id, schema.meetings.c.meeting_date).join(
        schema.meetings, schema.meetings.c.meeting_id == schema.races.c.meeting_id
    ).where(schema.meetings.c.meeting_date == day)
    race_ids = races.with_only_columns(schema.races.c.race_id).scalar_subquery()
    odds_t = schema.odds_snapshots
    odds = sa.select(odds_t.c.race_id, odds_t.c.runner_number, odds_t.c.checkpoint, odds_t.c.fixed_win).where(
        odds_t.c.race_id.in_(race_ids), odds_t.c.checkpoint.in_(["t60", "t15"])
    )
    res_t = schema.results
    results = sa.select(res_t.c.race_id, res_t.c.runner_number, res_t.c.position).where(res_t.c.race_id.in_(race_ids))
    return tuple(list(conn.execute(q).mappings()) for q in (odds, results, races))


@dg.asset(
    partitions_def=racing_days,
    deps=[ODDS_T60, ODDS_T15, RACE_RESULTS],
    group_name=GROUP,
    kinds={"python", "postgres"},
    backfill_policy=dg.BackfillPolicy.single_run(),
    automation_condition=recent_day_data_arrived(),
    freshness_policy=DAILY_DERIVED_FRESHNESS,
    description="Per runner the fixed-win price at T-60 and T-15, the finish and the move in percent; the day's "
    "biggest movers in the metadata. Written to the market_movers table. Kept up to date for recent days by the "
    "race_data_automation sensor as snapshots and results arrive.",
)
def market_movers(context: dg.AssetExecutionContext, race_db: RaceDatabase) -> None:
    written_total = 0
    for key in context.partition_keys:
        day = dt.date.fromisoformat(key)
        with race_db.connect() as conn:
            odds, results, races = _day_rows(conn, day)
        rows = market_movers_rows(odds, results, races)
        with race_db.begin() as conn:
            written = upsert_market_movers(conn, rows, dt.datetime.now(dt.UTC))
        written_total += written
        top = biggest_movers(rows)
        context.add_asset_metadata(
            {
                "runners": len(rows),
                "races": len({row["race_id"] for row in rows}),
                "rows_written": written,
                "with_result": sum(row["finish_position"] is not None for row in rows),
                "biggest_movers": dg.MetadataValue.md(
                    tabulate(top, headers="keys", tablefmt="pipe") if top else "_no moves yet_"
                ),
            },
            partition_key=key,
        )
    record_outcome(context.op_execution_context, Outcome.SUCCESS, len(context.partition_keys), 0)
    context.log.info(f"market movers of {len(context.partition_keys)} racing day(s): {written_total} rows written")
