"""The export's tables: their Arrow schemas (types, keys, descriptions) and the race-database query of one day.

Every table has `meeting_date` (the racing day, the file's day) as its first column, so a month of files filters on
one column whatever the table. Timestamps are UTC instants (`timestamp[us, tz=UTC]`); `meeting_date` is a date
without a zone (TAB's day of the meeting, see racing_orchestration/race_data/catalog.py). Rows are sorted by key, so
the same data always gives the same file. docs/race-data-export.md is generated from these definitions
(tests/racing_orchestration/export checks it matches).
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import pyarrow as pa
import sqlalchemy as sa

from racing_orchestration.race_db import schema

EXPORT_FORMAT_VERSION = "1"
EXPORTED_CHECKPOINTS = ("t60", "t15")
UTC_TIMESTAMP = pa.timestamp("us", tz="UTC")
POSITION = pa.struct([pa.field("runner_number", pa.int32()), pa.field("position", pa.int32())])


@dataclass(frozen=True)
class Column:
    name: str
    type: pa.DataType
    description: str
    nullable: bool = True
    # How the race database's value becomes the column's (default: as it is).
    convert: Callable[[Any], Any] | None = None


@dataclass(frozen=True)
class ExportTable:
    name: str
    description: str
    key: tuple[str, ...]
    columns: tuple[Column, ...]
    query: Callable[[dt.date], sa.Select]

    @property
    def schema(self) -> pa.Schema:
        fields = [pa.field(c.name, c.type, nullable=c.nullable, metadata={"description": c.description})
                  for c in self.columns]
        return pa.schema(fields, metadata={"table": self.name, "key": ",".join(self.key),
                                           "description": self.description,
                                           "export_format_version": EXPORT_FORMAT_VERSION})

    def to_arrow(self, rows: Sequence[sa.RowMapping]) -> pa.Table:
        data = {}
        for column in self.columns:
            values = [row[column.name] for row in rows]
            data[column.name] = [column.convert(v) for v in values] if column.convert else values
        return pa.Table.from_pydict(data, schema=self.schema)


def _positions(value: Any) -> list[dict[str, int]]:
    return [{"runner_number": int(runner), "position": int(position)} for runner, position in (value or [])]


_m, _r = schema.meetings, schema.races
DAY = Column("meeting_date", pa.date32(), "racing day: TAB's date of the meeting (the file's day)", nullable=False)
UPDATED = Column("updated_at", UTC_TIMESTAMP, "when the race database last changed the row", nullable=False)


def _of_day(table: sa.Table, *columns: sa.ColumnElement, day: dt.date, key: Sequence[str]) -> sa.Select:
    """`columns` of `table` joined to its race's meeting, for the meetings of `day`, ordered by `key`."""
    query = (sa.select(_m.c.meeting_date, *columns)
             .select_from(table.join(_r, _r.c.race_id == table.c.race_id).join(_m, _m.c.meeting_id == _r.c.meeting_id))
             .where(_m.c.meeting_date == day))
    return query.order_by(*(table.c[k] for k in key))


MEETINGS = ExportTable(
    "meetings", "One row per meeting of the racing day.", ("meeting_id",),
    (
        DAY,
        Column("meeting_id", pa.string(), "TAB's meeting id", nullable=False),
        Column("name", pa.string(), "venue name", nullable=False),
        Column("category", pa.string(), "T (thoroughbred), H (harness) or G (greyhounds)", nullable=False),
        Column("category_name", pa.string(), "TAB's name of the category"),
        Column("country", pa.string(), "TAB's country code (NZ, AUS, ...)", nullable=False),
        Column("state", pa.string(), "TAB's state or region code"),
        Column("track_condition", pa.string(), "track condition as TAB gives it"),
        UPDATED,
    ),
    lambda day: sa.select(_m.c.meeting_date, *(c for c in _m.c if c.name != "meeting_date"))
    .where(_m.c.meeting_date == day).order_by(_m.c.meeting_id),
)

RACES = ExportTable(
    "races", "One row per race of the day's meetings.", ("race_id",),
    (
        DAY,
        Column("race_id", pa.string(), "TAB's event id", nullable=False),
        Column("meeting_id", pa.string(), "the race's meeting (meetings.meeting_id)", nullable=False),
        Column("race_number", pa.int32(), "race number within the meeting", nullable=False),
        Column("name", pa.string(), "race name", nullable=False),
        Column("start_time", UTC_TIMESTAMP, "latest known advertised start", nullable=False),
        Column("status", pa.string(), "TAB's status (Open, Closed, Interim, Final, Abandoned)", nullable=False),
        Column("distance", pa.int32(), "distance in metres"),
        Column("track_condition", pa.string(), "track condition at the race"),
        Column("weather", pa.string(), "weather at the race"),
        Column("country", pa.string(), "TAB's country code of the race"),
        Column("actual_start", UTC_TIMESTAMP, "when the race actually started, once known"),
        Column("previous_start_time", UTC_TIMESTAMP, "the advertised start before its last change"),
        Column("start_time_changed_at", UTC_TIMESTAMP, "when the start time last changed"),
        UPDATED,
    ),
    lambda day: sa.select(_m.c.meeting_date, *_r.c).join(_m, _m.c.meeting_id == _r.c.meeting_id)
    .where(_m.c.meeting_date == day).order_by(_r.c.race_id),
)

RUNNERS = ExportTable(
    "runners", "One row per runner of a race, stored from the race's event at T-60 (and later checkpoints).",
    ("race_id", "runner_number"),
    (
        DAY,
        Column("race_id", pa.string(), "the runner's race (races.race_id)", nullable=False),
        Column("runner_number", pa.int32(), "saddle-cloth / box number", nullable=False),
        Column("entrant_id", pa.string(), "TAB's entrant id", nullable=False),
        Column("name", pa.string(), "runner name", nullable=False),
        Column("barrier", pa.int32(), "barrier / box draw"),
        Column("jockey", pa.string(), "jockey or driver"),
        Column("trainer_name", pa.string(), "trainer"),
        Column("is_scratched", pa.bool_(), "scratched", nullable=False),
        Column("is_late_scratched", pa.bool_(), "scratched late (after final fields)", nullable=False),
        Column("scratch_time", UTC_TIMESTAMP, "when it was scratched"),
        UPDATED,
    ),
    lambda day: _of_day(schema.runners, *(c for c in schema.runners.c), day=day, key=("race_id", "runner_number")),
)

_o = schema.odds_snapshots
ODDS = ExportTable(
    "odds", "The T-60 and T-15 odds snapshots: one row per runner and checkpoint.",
    ("race_id", "runner_number", "checkpoint"),
    (
        DAY,
        Column("race_id", pa.string(), "the race (races.race_id)", nullable=False),
        Column("runner_number", pa.int32(), "the runner (runners.runner_number)", nullable=False),
        Column("checkpoint", pa.string(), "t60 or t15: 60 or 15 minutes before the start", nullable=False),
        Column("fixed_win", pa.float64(), "fixed-odds win price"),
        Column("fixed_place", pa.float64(), "fixed-odds place price"),
        Column("pool_win", pa.float64(), "tote win pool price"),
        Column("pool_place", pa.float64(), "tote place pool price"),
        Column("is_scratched", pa.bool_(), "scratched when the snapshot was taken", nullable=False),
        Column("captured_at", UTC_TIMESTAMP, "when the snapshot was taken", nullable=False),
        Column("run_id", pa.string(), "the Dagster run that took it"),
    ),
    lambda day: _of_day(_o, *(c for c in _o.c if c.name != "id"), day=day,
                        key=("race_id", "runner_number", "checkpoint"))
    .where(_o.c.checkpoint.in_(EXPORTED_CHECKPOINTS)),
)

RESULTS = ExportTable(
    "results", "Finishing positions; provisional until the race is Final.", ("race_id", "runner_number"),
    (
        DAY,
        Column("race_id", pa.string(), "the race (races.race_id)", nullable=False),
        Column("runner_number", pa.int32(), "the runner (runners.runner_number)", nullable=False),
        Column("position", pa.int32(), "finishing position (1 = winner)", nullable=False),
        Column("name", pa.string(), "runner name as the result gives it"),
        Column("entrant_id", pa.string(), "TAB's entrant id"),
        Column("margin_length", pa.float64(), "margin in lengths"),
        Column("is_provisional", pa.bool_(), "true until TAB marks the race Final", nullable=False),
        UPDATED,
    ),
    lambda day: _of_day(schema.results, *schema.results.c, day=day, key=("race_id", "runner_number")),
)

_d = schema.dividends
DIVIDENDS = ExportTable(
    "dividends", "Dividends per product; Interim and Final rows are separate rows (TAB gives them separate ids).",
    ("race_id", "dividend_id"),
    (
        DAY,
        Column("race_id", pa.string(), "the race (races.race_id)", nullable=False),
        Column("dividend_id", pa.string(), "TAB's dividend id", nullable=False),
        Column("product_name", pa.string(), "bet type (Win, Place, Quinella, ...)", nullable=False),
        Column("status", pa.string(), "Interim or Final", nullable=False),
        Column("dividend", pa.float64(), "dividend per $1"),
        Column("pool_size", pa.float64(), "pool size in dollars"),
        Column("positions", pa.list_(POSITION), "the runners the dividend pays on, with their positions",
               nullable=False, convert=_positions),
        Column("description", pa.string(), "TAB's description of the dividend"),
        Column("tote", pa.string(), "the tote that declared it"),
        UPDATED,
    ),
    lambda day: _of_day(_d, *_d.c, day=day, key=("race_id", "dividend_id")),
)

EXPORT_TABLES: tuple[ExportTable, ...] = (MEETINGS, RACES, RUNNERS, ODDS, RESULTS, DIVIDENDS)


def _type_name(data_type: pa.DataType) -> str:
    return str(data_type).replace("item: ", "")


def schema_markdown() -> str:
    """The tables' documentation (docs/race-data-export.md holds it between its markers; a test keeps them equal).
    `python -m racing_orchestration.export.tables` prints it."""
    parts = []
    for table in EXPORT_TABLES:
        lines = [f"### `{table.name}`", "", f"{table.description} Key: `({', '.join(table.key)})`.", "",
                 "| column | type | null | description |", "|---|---|---|---|"]
        for column in table.columns:
            lines.append(f"| `{column.name}` | `{_type_name(column.type)}` | {'yes' if column.nullable else 'no'} "
                         f"| {column.description} |")
        parts.append("\n".join(lines))
    return "\n\n".join(parts) + "\n"


if __name__ == "__main__":
    print(schema_markdown(), end="")
