"""The `market_movers` table: per runner the fixed-win price at T-60 and T-15, the finish and the move."""

from __future__ import annotations

import datetime as dt
from collections.abc import Mapping, Sequence
from typing import Any

import sqlalchemy as sa

from racing_orchestration.race_db import schema
from racing_orchestration.race_db.upsert import dedupe_rows, require_aware, upsert_rows

MARKET_MOVER_COLUMNS = ("race_id", "runner_number", "meeting_date", "win_t60", "win_t15", "finish_position", "move_pct")


def upsert_market_movers(conn: sa.Connection, rows: Sequence[Mapping[str, Any]], computed_at: dt.datetime) -> int:
    """Store market-mover rows (checkpoints/movers_rows.py's) keyed by (race_id, runner_number)."""
    require_aware(computed_at, "computed_at")
    if not rows:
        return 0
    if missing := sorted(set(MARKET_MOVER_COLUMNS) - set(rows[0])):
        raise ValueError(f"market mover rows lack column(s) {missing}; nothing was written")
    clean = [{c: _plain(row[c]) for c in MARKET_MOVER_COLUMNS} | {"computed_at": computed_at} for row in rows]
    # computed_at alone changing is not a change: compare only the data columns.
    key = ["race_id", "runner_number"]
    data_cols = [c for c in MARKET_MOVER_COLUMNS if c not in key]
    return upsert_rows(conn, schema.market_movers, dedupe_rows(clean, key), key, compare=data_cols)


def _plain(value: Any) -> Any:
    # A float NaN or a numpy scalar (rows taken from a DataFrame) is stored as NULL or a Python number.
    if value is None or (isinstance(value, float) and value != value):
        return None
    return value.item() if hasattr(value, "item") else value


def market_movers_for_day(conn: sa.Connection, day: dt.date) -> list[sa.Row]:
    """The day's stored movers, biggest absolute move first."""
    table = schema.market_movers
    query = (
        sa.select(table)
        .where(table.c.meeting_date == day)
        .order_by(sa.func.abs(table.c.move_pct).desc().nulls_last(), table.c.race_id, table.c.runner_number)
    )
    return list(conn.execute(query))
