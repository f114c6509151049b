"""Completeness of one racing day, as an analyst counts it: every race that started has its T-60 and T-15 odds
snapshot or a recorded reason why not, and every finished race has Final results or is flagged provisional.

The figures are computed from the race database only (races, odds snapshots, results and the checkpoint ledger), so
they hold whatever Dagster's run history still has. `race_facts_for_day` reads the facts in four queries;
`day_completeness` (pure) classifies them. The `racing_day` asset checks and, through them, `/metrics`, the Grafana
panel and the `RacingDayIncomplete` alert all show these figures.

Each expected item (race x checkpoint) ends in exactly one class:
- `captured`: the data is there (snapshot rows; Final results);
- `explained`: not there, with a recorded reason (ledger `skipped` / `failed` / `abandoned` with its note, or a race
  TAB reports abandoned); for results, `provisional` (the post-race chain ended without Final and said so);
- `pending`: a run is requested, running or waiting for the next post-race attempt (not settled yet);
- `missing`: neither data nor reason: data lost without anybody being told.
"""

from __future__ import annotations

import datetime as dt
from collections import defaultdict
from dataclasses import dataclass, field
from enum import StrEnum

import sqlalchemy as sa

from racing_orchestration.race_db import schema
from racing_orchestration.race_db.checkpoints import UNFINISHED_STATES
from racing_orchestration.tab.models import ABANDONED, CLOSED, FINAL, INTERIM, LIVE, status_is

PRE_RACE_CHECKPOINTS = ("t60", "t15")
RESULTS = "results"  # the figure of the post-race checkpoint
# The post-race checkpoint falls due at start + 5 min; a race is counted as finished from then on.
RESULTS_DUE_AFTER_START = dt.timedelta(minutes=5)
# Ledger states that end a checkpoint without its data, with a note saying why.
EXPLAINED_STATES = ("skipped", "failed", "abandoned")
PENDING_STATES = (*UNFINISHED_STATES, "waiting_final")


class ItemClass(StrEnum):
    CAPTURED = "captured"
    EXPLAINED = "explained"
    PENDING = "pending"
    MISSING = "missing"


@dataclass(frozen=True)
class LedgerEntry:
    state: str
    note: str | None = None


@dataclass(frozen=True)
class RaceFacts:
    """What the race database holds about one race, for the completeness figures."""

    race_id: str
    start_time: dt.datetime
    status: str
    snapshots: frozenset[str] = frozenset()  # checkpoints with odds snapshot rows
    final_results: bool = False  # result rows not flagged provisional
    provisional_results: bool = False  # result rows flagged provisional
    ledger: dict[str, LedgerEntry] = field(default_factory=dict)  # checkpoint -> ledger row


@dataclass(frozen=True)
class Item:
    race_id: str
    figure: str  # t60 | t15 | results
    item_class: ItemClass
    reason: str


def race_started(race: RaceFacts, now: dt.datetime) -> bool:
    """Past its (latest known) start time, or TAB says it is running or run."""
    return race.start_time <= now or status_is(race.status, CLOSED, LIVE, INTERIM, FINAL)


def race_finished(race: RaceFacts, now: dt.datetime) -> bool:
    """Run (Interim / Final), or past the post-race checkpoint's due time; an abandoned race never finishes."""
    if status_is(race.status, ABANDONED):
        return False
    return status_is(race.status, INTERIM, FINAL) or race.start_time + RESULTS_DUE_AFTER_START <= now


def _ledger_reason(entry: LedgerEntry) -> str:
    return f"{entry.state}: {entry.note}" if entry.note else entry.state


def classify_snapshot(race: RaceFacts, checkpoint: str) -> Item:
    """The T-60 or T-15 item of a started race."""
    if checkpoint in race.snapshots:
        return Item(race.race_id, checkpoint, ItemClass.CAPTURED, "snapshot stored")
    entry = race.ledger.get(checkpoint)
    if entry is not None and entry.state in EXPLAINED_STATES:
        return Item(race.race_id, checkpoint, ItemClass.EXPLAINED, _ledger_reason(entry))
    if entry is not None and entry.state in PENDING_STATES:
        return Item(race.race_id, checkpoint, ItemClass.PENDING, _ledger_reason(entry))
    if status_is(race.status, ABANDONED):
        return Item(race.race_id, checkpoint, ItemClass.EXPLAINED, "race abandoned (TAB status)")
    if entry is not None:  # e.g. `done` with no snapshot rows: the data went missing after the run
        return Item(race.race_id, checkpoint, ItemClass.MISSING, f"ledger says {entry.state} but no snapshot rows")
    return Item(race.race_id, checkpoint, ItemClass.MISSING, "no snapshot and no ledger row")


def classify_results(race: RaceFacts) -> Item:
    """The results item of a finished race: Final results, or flagged provisional by the post-race chain."""
    if race.final_results:
        return Item(race.race_id, RESULTS, ItemClass.CAPTURED, "Final results stored")
    entry = race.ledger.get("post")
    if entry is not None and entry.state in PENDING_STATES:
        return Item(race.race_id, RESULTS, ItemClass.PENDING, _ledger_reason(entry))
    if entry is not None and entry.state == "provisional":
        return Item(race.race_id, RESULTS, ItemClass.EXPLAINED, _ledger_reason(entry))
    if race.provisional_results:  # e.g. stored by a manual check, which leaves the ledger alone
        return Item(race.race_id, RESULTS, ItemClass.EXPLAINED, "results stored flagged provisional")
    if entry is not None:  # failed / skipped: a reason, but no results: still a gap the analyst must hear about
        return Item(race.race_id, RESULTS, ItemClass.MISSING, f"no Final results ({_ledger_reason(entry)})")
    return Item(race.race_id, RESULTS, ItemClass.MISSING, "no Final results and no ledger row")


@dataclass(frozen=True)
class Figure:
    """Counts of one figure (t60, t15 or results) over a day."""

    name: str
    expected: int
    counts: dict[ItemClass, int]
    gaps: list[Item]  # pending and missing items, by race

    @property
    def complete(self) -> int:
        return self.counts[ItemClass.CAPTURED] + self.counts[ItemClass.EXPLAINED]

    @property
    def ratio(self) -> float:
        """Share of expected items captured or explained; 1.0 for a day with nothing expected yet."""
        return self.complete / self.expected if self.expected else 1.0


@dataclass(frozen=True)
class DayCompleteness:
    races: int
    started: int
    finished: int
    abandoned: int
    figures: dict[str, Figure]

    def figure_group(self, names: tuple[str, ...]) -> Figure:
        """Several figures summed into one (e.g. both pre-race checkpoints)."""
        counts = {c: sum(self.figures[n].counts[c] for n in names) for c in ItemClass}
        gaps = sorted((g for n in names for g in self.figures[n].gaps), key=lambda g: (g.race_id, g.figure))
        return Figure("+".join(names), sum(self.figures[n].expected for n in names), counts, gaps)


def _figure(name: str, items: list[Item]) -> Figure:
    counts = dict.fromkeys(ItemClass, 0)
    for item in items:
        counts[item.item_class] += 1
    gaps = [i for i in items if i.item_class in (ItemClass.PENDING, ItemClass.MISSING)]
    return Figure(name, len(items), counts, sorted(gaps, key=lambda g: g.race_id))


def day_completeness(races: list[RaceFacts], now: dt.datetime) -> DayCompleteness:
    """The day's figures at `now`: items of races not started (or not finished) yet are not expected yet."""
    if now.tzinfo is None:
        raise ValueError(f"now must be timezone-aware, got naive {now.isoformat()}")
    started = [r for r in races if race_started(r, now)]
    finished = [r for r in races if race_finished(r, now)]
    figures = {cp: _figure(cp, [classify_snapshot(r, cp) for r in started]) for cp in PRE_RACE_CHECKPOINTS}
    figures[RESULTS] = _figure(RESULTS, [classify_results(r) for r in finished])
    abandoned = sum(status_is(r.status, ABANDONED) for r in races)
    return DayCompleteness(len(races), len(started), len(finished), abandoned, figures)


def race_facts_for_day(conn: sa.Connection, day: dt.date) -> list[RaceFacts]:
    """The facts of every race of meetings dated `day` (the meeting's local date, as the daily partitions use)."""
    races_t, meetings_t = schema.races, schema.meetings
    day_races = (
        sa.select(races_t.c.race_id, races_t.c.start_time, races_t.c.status)
        .join(meetings_t, meetings_t.c.meeting_id == races_t.c.meeting_id)
        .where(meetings_t.c.meeting_date == day)
    )
    rows = list(conn.execute(day_races.order_by(races_t.c.start_time, races_t.c.race_id)))
    if not rows:
        return []
    ids = day_races.with_only_columns(races_t.c.race_id).scalar_subquery()
    odds = schema.odds_snapshots
    snapshots: dict[str, set[str]] = defaultdict(set)
    for race_id, checkpoint in conn.execute(
        sa.select(odds.c.race_id, odds.c.checkpoint).where(odds.c.race_id.in_(ids)).distinct()
    ):
        snapshots[race_id].add(checkpoint)
    res = schema.results
    final, provisional = set(), set()
    for race_id, is_provisional in conn.execute(
        sa.select(res.c.race_id, res.c.is_provisional).where(res.c.race_id.in_(ids)).distinct()
    ):
        (provisional if is_provisional else final).add(race_id)
    ledger_t = schema.race_checkpoints
    ledger: dict[str, dict[str, LedgerEntry]] = defaultdict(dict)
    for race_id, checkpoint, state, note in conn.execute(
        sa.select(ledger_t.c.race_id, ledger_t.c.checkpoint, ledger_t.c.state, ledger_t.c.note)
        .where(ledger_t.c.race_id.in_(ids))
    ):
        ledger[race_id][checkpoint] = LedgerEntry(state, note)
    return [
        RaceFacts(race_id=r.race_id, start_time=r.start_time, status=r.status,
                  snapshots=frozenset(snapshots.get(r.race_id, ())), final_results=r.race_id in final,
                  provisional_results=r.race_id in provisional, ledger=dict(ledger.get(r.race_id, {})))
        for r in rows
    ]


def last_start_of_day(conn: sa.Connection, day: dt.date) -> dt.datetime | None:
    """The latest start time among the races of meetings dated `day`; None when the day has no races."""
    races_t, meetings_t = schema.races, schema.meetings
    query = (
        sa.select(sa.func.max(races_t.c.start_time))
        .join(meetings_t, meetings_t.c.meeting_id == races_t.c.meeting_id)
        .where(meetings_t.c.meeting_date == day)
    )
    return conn.execute(query).scalar()
