"""Read queries on the race database, for sensors, jobs, assets and the CLI."""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterable
from zoneinfo import ZoneInfo

import sqlalchemy as sa

from orchestration_core.settings import racing_timezone
from racing_orchestration.race_db import schema

# Races past these statuses need no pre-race checkpoint: they are run (Interim/Final) or will not be (Abandoned).
FINISHED_STATUSES: tuple[str, ...] = ("Interim", "Final", "Abandoned")

_races, _meetings = schema.races, schema.meetings
_RACE_COLUMNS = (
    *_races.c,
    _meetings.c.name.label("meeting_name"),
    _meetings.c.meeting_date,
    _meetings.c.category,
    _meetings.c.country.label("meeting_country"),
)


def _race_select() -> sa.Select:
    return sa.select(*_RACE_COLUMNS).join(_meetings, _meetings.c.meeting_id == _races.c.meeting_id)


def _aware(value: dt.datetime, what: str) -> dt.datetime:
    if value.tzinfo is None:
        raise ValueError(f"{what} must be timezone-aware, got naive {value.isoformat()}")
    return value


def race_row(conn: sa.Connection, race_id: str) -> sa.Row | None:
    """One race with its meeting's name, date, category and country; None when unknown."""
    return conn.execute(_race_select().where(_races.c.race_id == race_id)).first()


def races_starting_between(
    conn: sa.Connection,
    start: dt.datetime,
    end: dt.datetime,
    statuses_excluded: Iterable[str] = FINISHED_STATUSES,
) -> list[sa.Row]:
    """Races with start_time in [start, end), by start time, minus the excluded statuses (case-insensitive).

    The range is served by the index on races.start_time.
    """
    excluded = sorted({status.casefold() for status in statuses_excluded})
    query = _race_select().where(
        _races.c.start_time >= _aware(start, "start"), _races.c.start_time < _aware(end, "end")
    )
    if excluded:
        query = query.where(sa.func.lower(_races.c.status).not_in(excluded))
    return list(conn.execute(query.order_by(_races.c.start_time, _races.c.race_id)))


def local_day_bounds(day: dt.date, tz: str | ZoneInfo | None = None) -> tuple[dt.datetime, dt.datetime]:
    """UTC bounds [start, end) of `day` in `tz` (default RACING_TIMEZONE); DST days are 23 or 25 hours long."""
    zone = tz if isinstance(tz, ZoneInfo) else ZoneInfo(tz or racing_timezone())
    start = dt.datetime.combine(day, dt.time(), tzinfo=zone)
    end = dt.datetime.combine(day + dt.timedelta(days=1), dt.time(), tzinfo=zone)
    return start.astimezone(dt.UTC), end.astimezone(dt.UTC)


def races_for_day(conn: sa.Connection, day: dt.date, tz: str | ZoneInfo | None = None) -> list[sa.Row]:
    """Every race (any status) starting on `day` in `tz` (default RACING_TIMEZONE), by start time."""
    start, end = local_day_bounds(day, tz)
    return races_starting_between(conn, start, end, statuses_excluded=())


def runners_for_race(conn: sa.Connection, race_id: str) -> list[sa.Row]:
    table = schema.runners
    return list(conn.execute(sa.select(table).where(table.c.race_id == race_id).order_by(table.c.runner_number)))


def odds_for_race(conn: sa.Connection, race_id: str, checkpoint: str | None = None) -> list[sa.Row]:
    table = schema.odds_snapshots
    query = sa.select(table).where(table.c.race_id == race_id)
    if checkpoint is not None:
        query = query.where(table.c.checkpoint == checkpoint)
    return list(conn.execute(query.order_by(table.c.checkpoint, table.c.runner_number)))


def results_for_race(conn: sa.Connection, race_id: str) -> list[sa.Row]:
    table = schema.results
    query = sa.select(table).where(table.c.race_id == race_id).order_by(table.c.position, table.c.runner_number)
    return list(conn.execute(query))


def dividends_for_race(conn: sa.Connection, race_id: str, status: str | None = None) -> list[sa.Row]:
    """A race's dividends, optionally of one status (case-insensitive), by product."""
    table = schema.dividends
    query = sa.select(table).where(table.c.race_id == race_id)
    if status is not None:
        query = query.where(sa.func.lower(table.c.status) == status.casefold())
    return list(conn.execute(query.order_by(table.c.product_name, table.c.description, table.c.dividend_id)))


def final_dividends(conn: sa.Connection, race_id: str) -> list[sa.Row]:
    """Only the confirmed (Final) dividends; the Interim rows a Final race still carries are left out."""
    return dividends_for_race(conn, race_id, status="Final")


def table_counts(conn: sa.Connection) -> dict[str, int]:
    """Row count of every race-database table (for summaries and tests)."""
    return {
        name: conn.execute(sa.select(sa.func.count()).select_from(table)).scalar_one()
        for name, table in schema.metadata.tables.items()
    }
