"""Idempotent writes of TAB models to the race database (INSERT ... ON CONFLICT on a Connection).

Every upsert updates a row only when a stored column really differs (`... WHERE (cols) IS DISTINCT FROM
(excluded cols)`), so storing the same data twice writes nothing and leaves `updated_at` alone. Functions return
the number of rows written (inserted, changed or removed): 0 means the database already held exactly this data.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import hashlib
import json
import re
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

import sqlalchemy as sa
from sqlalchemy.dialects.postgresql import insert as pg_insert

from racing_orchestration.race_db import schema
from racing_orchestration.race_db.queries import (  # noqa: F401  (re-exported: the published store interface)
    final_dividends,
    race_row,
    races_for_day,
    races_starting_between,
)
from racing_orchestration.race_db.upsert import (
    dedupe_rows,
    require_aware,
    upsert_rows,
    written_rows,
)

if TYPE_CHECKING:
    from racing_orchestration.tab.client import ApiCall
    from racing_orchestration.tab.models import Dividend, Event, Meeting, Result, Runner

_CHECKPOINT = re.compile(r"^[a-z][a-z0-9_]{0,31}$")


class UnknownRaceError(ValueError):
    """A write for a race (or meeting) that is not in the database; nothing was written."""


@dataclasses.dataclass(frozen=True)
class UpsertCounts:
    meetings: int  # meetings stored (after de-duplication)
    races: int  # races stored
    meetings_changed: int = 0  # of which inserted or changed
    races_changed: int = 0


def _start_time_change(excluded: Any) -> dict[str, Any]:
    # SET expressions see the old row: remember the previous start and when it moved (races get delayed).
    moved = schema.races.c.start_time.is_distinct_from(excluded.start_time)
    return {
        "previous_start_time": sa.case((moved, schema.races.c.start_time), else_=schema.races.c.previous_start_time),
        "start_time_changed_at": sa.case((moved, sa.func.now()), else_=schema.races.c.start_time_changed_at),
    }


def _require_race(conn: sa.Connection, race_id: str, what: str) -> None:
    if conn.execute(sa.select(schema.races.c.race_id).where(schema.races.c.race_id == race_id)).first() is None:
        raise UnknownRaceError(
            f"cannot store {what}: race {race_id!r} is not in the race database "
            "(store its meeting or event first); nothing was written"
        )


def upsert_meetings(conn: sa.Connection, meetings: list[Meeting]) -> UpsertCounts:
    """Store meetings and the races listed under them; new start times are recorded as changes."""
    meeting_rows = dedupe_rows(
        (
            {
                "meeting_id": m.meeting_id,
                "name": m.name,
                "meeting_date": m.date,
                "category": m.category,
                "category_name": m.category_name,
                "country": m.country,
                "state": m.state,
                "track_condition": m.track_condition,
            }
            for m in meetings
        ),
        ["meeting_id"],
    )
    race_rows = dedupe_rows(
        (
            {
                "race_id": r.race_id,
                "meeting_id": m.meeting_id,
                "race_number": r.race_number,
                "name": r.name,
                "start_time": r.start_time,
                "status": r.status,
                "distance": r.distance,
                "track_condition": r.track_condition,
                "weather": r.weather,
                "country": r.country,
            }
            for m in meetings
            for r in m.races
        ),
        ["race_id"],
    )
    if not meeting_rows:
        return UpsertCounts(0, 0)
    meetings_changed = upsert_rows(conn, schema.meetings, meeting_rows, ["meeting_id"])
    races_changed = upsert_rows(conn, schema.races, race_rows, ["race_id"], _start_time_change) if race_rows else 0
    return UpsertCounts(len(meeting_rows), len(race_rows), meetings_changed, races_changed)


def upsert_event(conn: sa.Connection, event: Event) -> int:
    """Store an event's race row (status, start time change) and its runners (scratchings); not results/dividends."""
    race = event.race
    known = conn.execute(
        sa.select(schema.meetings.c.meeting_id).where(schema.meetings.c.meeting_id == race.meeting_id)
    ).first()
    if known is None:
        raise UnknownRaceError(
            f"cannot store event {race.event_id!r}: its meeting {race.meeting_id!r} "
            f"({race.meeting_name or 'unnamed'}) is not in the race database (store the meeting first); "
            "nothing was written"
        )
    race_row_values = {
        "race_id": race.event_id,
        "meeting_id": race.meeting_id,
        "race_number": race.race_number,
        "name": race.name,
        "start_time": race.advertised_start,
        "status": race.status,
        "distance": race.distance,
        "track_condition": race.track_condition,
        "weather": race.weather,
        "actual_start": race.actual_start,
    }
    written = upsert_rows(conn, schema.races, [race_row_values], ["race_id"], _start_time_change)
    runner_rows = [
        {
            "race_id": race.event_id,
            "runner_number": r.runner_number,
            "entrant_id": r.entrant_id,
            "name": r.name,
            "barrier": r.barrier,
            "jockey": r.jockey,
            "trainer_name": r.trainer_name,
            "is_scratched": r.is_scratched,
            "is_late_scratched": r.is_late_scratched,
            "scratch_time": r.scratch_time,
        }
        for r in event.runners
    ]
    if runner_rows:
        runner_rows = dedupe_rows(runner_rows, ["runner_number"])
        written += upsert_rows(conn, schema.runners, runner_rows, ["race_id", "runner_number"])
    return written


def store_odds_snapshot(
    conn: sa.Connection,
    race_id: str,
    checkpoint: str,
    runners: list[Runner],
    captured_at: dt.datetime,
    run_id: str | None,
) -> int:
    """One odds row per runner for this checkpoint; re-taking the checkpoint replaces the rows, never adds."""
    if not _CHECKPOINT.match(checkpoint):
        raise ValueError(f"checkpoint must be a short lower-case name like 't60', got {checkpoint!r}")
    require_aware(captured_at, "captured_at")
    if not runners:
        return 0
    _require_race(conn, race_id, f"odds snapshot {checkpoint}")
    rows = [
        {
            "race_id": race_id,
            "runner_number": r.runner_number,
            "checkpoint": checkpoint,
            "fixed_win": r.odds.fixed_win,
            "fixed_place": r.odds.fixed_place,
            "pool_win": r.odds.pool_win,
            "pool_place": r.odds.pool_place,
            "is_scratched": r.is_scratched,
            "captured_at": captured_at,
            "run_id": run_id,
        }
        for r in runners
    ]
    key = ["race_id", "runner_number", "checkpoint"]
    return upsert_rows(conn, schema.odds_snapshots, dedupe_rows(rows, ["runner_number"]), key)


def store_results(conn: sa.Connection, race_id: str, results: list[Result], provisional: bool) -> int:
    """Replace the race's result set (runners no longer placed are removed); an empty list stores nothing."""
    if not results:
        return 0
    numbers = [r.runner_number for r in results]
    if duplicated := sorted({n for n in numbers if numbers.count(n) > 1}):
        raise ValueError(
            f"results for race {race_id!r} list runner(s) {duplicated} more than once; nothing was written"
        )
    _require_race(conn, race_id, "results")
    rows = [
        {
            "race_id": race_id,
            "runner_number": r.runner_number,
            "position": r.position,
            "name": r.name,
            "entrant_id": r.entrant_id,
            "margin_length": r.margin_length,
            "is_provisional": provisional,
        }
        for r in results
    ]
    written = upsert_rows(conn, schema.results, dedupe_rows(rows, ["runner_number"]), ["race_id", "runner_number"])
    stale = sa.delete(schema.results).where(
        schema.results.c.race_id == race_id, schema.results.c.runner_number.not_in(numbers)
    )
    return written + conn.execute(stale).rowcount


def store_dividends(conn: sa.Connection, race_id: str, dividends: list[Dividend]) -> int:
    """Store dividends keyed by TAB's dividend id: Interim and Final rows stay separate rows with their status."""
    if not dividends:
        return 0
    if blank := [i for i, d in enumerate(dividends) if not d.dividend_id.strip()]:
        raise ValueError(f"dividends for race {race_id!r} at index {blank} have no dividend id; nothing was written")
    _require_race(conn, race_id, "dividends")
    rows = [
        {
            "race_id": race_id,
            "dividend_id": d.dividend_id,
            "product_name": d.product_name,
            "status": d.status,
            "dividend": d.dividend,
            "pool_size": d.pool_size,
            "positions": [list(p) for p in d.positions],
            "description": d.description,
            "tote": d.tote,
        }
        for d in dividends
    ]
    return upsert_rows(conn, schema.dividends, dedupe_rows(rows, ["dividend_id"]), ["race_id", "dividend_id"])


def scrape_call_key(endpoint: str, params: Mapping[str, Any], started_at: dt.datetime, attempts: int) -> str:
    """Identity of one API call, so recording the same calls again (a retried step) adds no rows."""
    raw = json.dumps([endpoint, params, started_at.isoformat(), attempts], sort_keys=True, default=str)
    return hashlib.sha256(raw.encode()).hexdigest()


def record_scrapes(conn: sa.Connection, calls: list[ApiCall], run_id: str | None) -> int:
    """One `scrapes` row per API call, linked to the Dagster run that made it; returns rows added."""
    rows = []
    for call in calls:
        require_aware(call.started_at, f"ApiCall {call.endpoint} started_at")
        params = json.loads(json.dumps(call.params, sort_keys=True, default=str))  # dates etc. stored as text
        rows.append(
            {
                "call_key": scrape_call_key(call.endpoint, params, call.started_at, call.attempts),
                "endpoint": call.endpoint,
                "params": params,
                "outcome": call.outcome,
                "status_code": call.status_code,
                "duration_ms": float(call.duration_ms),
                "attempts": call.attempts,
                "items": call.items,
                "error": call.error,
                "started_at": call.started_at,
                "run_id": run_id,
            }
        )
    if not rows:
        return 0
    stmt = pg_insert(schema.scrapes).on_conflict_do_nothing(index_elements=["call_key"])
    return written_rows(conn, stmt.returning(schema.scrapes.c.call_key), rows)
