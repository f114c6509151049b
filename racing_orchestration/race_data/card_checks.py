"""Asset checks on a racing day's card (`race_cards`), evaluated from the race database after every stored card.

- `card_not_empty`: once the day's scrape is done, the day has meetings and races. A day ahead is only checked once
  something is stored for it (tomorrow's card is normally empty at 06:00).
- `races_have_runners`: every race whose runners are due (not abandoned) has runners. TAB's meetings list carries no
  runners: they are stored from the race's own event, fetched at T-60 (and T-15, T+5). A race's runners are due once
  its T-60 checkpoint has ended in the ledger (done, failed, skipped) or, whatever the ledger says, once the race has
  started; a race past T-60 whose T-60 has not ended yet (a card stored after that time, its run requested late or
  still running) is "awaiting T-60", not a failure (`runners_due`). A day re-scraped by a backfill after it was
  raced, with no checkpoint run, fails here: its races have no runners in the database (nor in its export).
- `start_times_on_day`: every race starts within the racing day, read in RACING_TIMEZONE with the slack TAB's day
  labels need: an overseas meeting is listed under TAB's day, so a US evening meeting of the 16th is on the 17th
  (from ~04:30 NZ time) and a UK afternoon meeting of the 17th ends ~05:00 NZ time on the 18th; Perth's last
  greyhound race starts ~02:30 NZ time the next day. A start outside [day 00:00 - 6 h, next day 00:00 + 12 h)
  belongs to another day.

The checks are recorded by every run that changes what they judge, one evaluation per racing day: the step that
stored the card (the morning scrape's and card refresh's summary step, the race_cards asset's record step, so a
backfill over a range records each day's result under its own partition), and each checkpoint run once it stored the
race's event or ended its ledger row (`record_card_checks`), so a check does not stay red for runners that are in the
database. Each reads the day and records it under the day's advisory lock (`lock_card_day`): of runs finishing
together, the last evaluation recorded is the one that read the latest data. Time alone moves a race from awaiting
to due (its jump without a T-60 run) and no run records that; `racing verify-checks` shows it.

While a morning scrape's combinations wait for their retries, each one that stores meetings also evaluates its day
at once (`checks_while_scraping`): what is stored is judged as it is stored, and a failing `card_not_empty` waits for
the summary step, which judges the day once its scrape is done.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable
from dataclasses import dataclass
from enum import StrEnum
from zoneinfo import ZoneInfo

import dagster as dg
import sqlalchemy as sa

from racing_orchestration.race_data.catalog import RACE_CARDS
from racing_orchestration.race_db import schema
from racing_orchestration.race_db.queries import local_day_bounds
from racing_orchestration.race_db.resource import RaceDatabase
from racing_orchestration.tab.models import ABANDONED, status_is

CARD_NOT_EMPTY = "card_not_empty"
RACES_HAVE_RUNNERS = "races_have_runners"
START_TIMES_ON_DAY = "start_times_on_day"
RUNNERS_DUE_BEFORE_START = dt.timedelta(minutes=60)  # the T-60 checkpoint stores a race's runners
STARTS_BEFORE_DAY = dt.timedelta(hours=6)
STARTS_AFTER_DAY = dt.timedelta(hours=12)
MAX_RACES_LISTED = 20
# The T-60 ledger states in which the checkpoint has ended: whatever it was going to store is stored.
T60_ENDED = ("done", "abandoned", "failed", "skipped")
# The first key of the race database's advisory lock on one racing day's card records (the second is the day).
CARD_DAY_LOCK = 0x52434444

CARD_CHECK_SPECS = [
    dg.AssetCheckSpec(CARD_NOT_EMPTY, asset=RACE_CARDS,
                      description="Once the day's scrape is done, the day has meetings and races."),
    dg.AssetCheckSpec(RACES_HAVE_RUNNERS, asset=RACE_CARDS,
                      description="Every race whose runners are due (not abandoned) has runners: they are stored "
                      "from the race's event at T-60, so they are due once its T-60 run has ended or the race has "
                      "started; a race past T-60 whose T-60 run has not ended is awaiting it, not failing."),
    dg.AssetCheckSpec(START_TIMES_ON_DAY, asset=RACE_CARDS,
                      description="Every race starts within the racing day (RACING_TIMEZONE, from 18:00 the evening "
                      "before to 12:00 the day after, for overseas meetings listed under TAB's day)."),
]


@dataclass(frozen=True)
class CardRace:
    race_id: str
    meeting: str
    race_number: int
    start_time: dt.datetime
    status: str
    runners: int
    t60: str | None = None  # the state of its T-60 checkpoint in the ledger; None while not claimed


class Runners(StrEnum):
    """Where a race stands for `races_have_runners`."""

    EXEMPT = "abandoned"  # an abandoned race gets no checkpoints
    NOT_YET = "before T-60"
    AWAITING = "awaiting T-60"  # past T-60, its T-60 not ended and the race not started
    DUE = "due"


def runners_due(race: CardRace, now: dt.datetime) -> Runners:
    """Pure: whether `race`'s runners are due at `now`. At exactly T-60 the T-60 run is due, not yet ended; once it
    has ended (or the race has started: no T-60 is taken after the jump) its runners are in the database or never
    will be from it."""
    if status_is(race.status, ABANDONED):
        return Runners.EXEMPT
    if now < race.start_time - RUNNERS_DUE_BEFORE_START:
        return Runners.NOT_YET
    if race.runners or race.t60 in T60_ENDED or now >= race.start_time:
        return Runners.DUE
    return Runners.AWAITING


@dataclass(frozen=True)
class CardFacts:
    """What the race database holds for one racing day's card."""

    day: dt.date
    meetings: int
    races: tuple[CardRace, ...]


@dataclass(frozen=True)
class CardCheck:
    name: str
    passed: bool
    description: str
    metadata: dict[str, object]


def card_facts(conn: sa.Connection, day: dt.date) -> CardFacts:
    """The day's meetings count and races with their runner counts and T-60 ledger state (two queries)."""
    meetings, races, runners, ledger = schema.meetings, schema.races, schema.runners, schema.race_checkpoints
    count = conn.execute(sa.select(sa.func.count()).select_from(meetings).where(meetings.c.meeting_date == day))
    runner_count = (sa.select(sa.func.count()).select_from(runners)
                    .where(runners.c.race_id == races.c.race_id).scalar_subquery())
    t60_state = (sa.select(ledger.c.state)
                 .where(ledger.c.race_id == races.c.race_id, ledger.c.checkpoint == "t60").scalar_subquery())
    query = (sa.select(races.c.race_id, meetings.c.name, races.c.race_number, races.c.start_time, races.c.status,
                       runner_count.label("runners"), t60_state.label("t60"))
             .join(meetings, meetings.c.meeting_id == races.c.meeting_id)
             .where(meetings.c.meeting_date == day)
             .order_by(races.c.start_time, races.c.race_id))
    rows = conn.execute(query).all()
    return CardFacts(day, count.scalar_one(), tuple(CardRace(*row) for row in rows))


def _race_list(races: list[CardRace], tz: str) -> str:
    zone = ZoneInfo(tz)
    lines = [f"- {r.meeting} R{r.race_number} ({r.race_id}), starts {r.start_time.astimezone(zone):%Y-%m-%d %H:%M}"
             for r in races[:MAX_RACES_LISTED]]
    more = [f"- (+{len(races) - MAX_RACES_LISTED} more)"] if len(races) > MAX_RACES_LISTED else []
    return "\n".join(lines + more)


def card_checks(facts: CardFacts, now: dt.datetime, tz: str) -> list[CardCheck]:
    """The three checks of one day's card (pure)."""
    day, races = facts.day, list(facts.races)
    not_empty = CardCheck(
        CARD_NOT_EMPTY, facts.meetings > 0 and len(races) > 0,
        f"{day}: {facts.meetings} meetings, {len(races)} races" if races
        else f"{day}: no races stored" + (f" under {facts.meetings} meetings" if facts.meetings else ""),
        {"meetings": facts.meetings, "races": len(races)},
    )
    standing = {r.race_id: runners_due(r, now) for r in races}
    due = [r for r in races if standing[r.race_id] == Runners.DUE]
    awaiting = [r for r in races if standing[r.race_id] == Runners.AWAITING]
    without = [r for r in due if r.runners == 0]
    runners_meta: dict[str, object] = {"races_past_t60": len(due) + len(awaiting), "races_awaiting_t60": len(awaiting),
                                       "races_without_runners": len(without)}
    if without:
        runners_meta["races"] = dg.MetadataValue.md(_race_list(without, tz))
    if awaiting:
        runners_meta["races_awaiting"] = dg.MetadataValue.md(_race_list(awaiting, tz))
    still = f"; {len(awaiting)} more awaiting their T-60 run" if awaiting else ""
    runners = CardCheck(
        RACES_HAVE_RUNNERS, not without,
        f"{day}: {len(without)} of {len(due)} races past T-60 have no runners (no T-60 or later event stored)"
        f"{still}" if without else f"{day}: all {len(due)} races past T-60 have runners{still}" if due
        else f"{day}: {len(awaiting)} races past T-60 awaiting their T-60 run" if awaiting
        else f"{day}: no race has reached T-60 yet",
        runners_meta,
    )
    start, end = local_day_bounds(day, tz)
    earliest, latest = start - STARTS_BEFORE_DAY, end + STARTS_AFTER_DAY
    outside = [r for r in races if not earliest <= r.start_time < latest]
    starts_meta: dict[str, object] = {"races_outside_day": len(outside),
                                      "window_utc": f"{earliest:%Y-%m-%d %H:%M} to {latest:%Y-%m-%d %H:%M}"}
    if outside:
        starts_meta["races"] = dg.MetadataValue.md(_race_list(outside, tz))
    starts = CardCheck(
        START_TIMES_ON_DAY, not outside,
        f"{day}: {len(outside)} of {len(races)} races start outside the racing day" if outside
        else f"{day}: all {len(races)} races start within the racing day",
        starts_meta,
    )
    return [not_empty, runners, starts]


def check_evaluations(checks: list[CardCheck], day: dt.date) -> list[dg.AssetCheckEvaluation]:
    """The checks as evaluations of the day's partition, recorded in the run's event log."""
    return [
        dg.AssetCheckEvaluation(
            asset_key=RACE_CARDS, check_name=check.name, passed=check.passed, partition=day.isoformat(),
            severity=dg.AssetCheckSeverity.ERROR, description=check.description, metadata=check.metadata,
        )
        for check in checks
    ]


def lock_card_day(conn: sa.Connection, day: dt.date) -> None:
    """Hold the day's card lock until `conn`'s transaction ends: runs that read the day and record what they read
    (materializations, check evaluations) take turns, so the latest record is the one that read the latest data."""
    conn.execute(sa.text("SELECT pg_advisory_xact_lock(:kind, :day)"), {"kind": CARD_DAY_LOCK, "day": day.toordinal()})


def record_card_checks(context: dg.OpExecutionContext, race_db: RaceDatabase, day: dt.date, now: dt.datetime,
                       tz: str, select: Callable[[list[CardCheck]], list[CardCheck]] = lambda checks: checks,
                       ) -> list[CardCheck]:
    """Evaluate the day's card checks over what the race database holds now and record them in the run's event log,
    under the day's lock (`log_event` writes the event before it returns). Only a day inside the partitions: the
    caller checks `racing_day_key` first."""
    with race_db.begin() as conn:
        lock_card_day(conn, day)
        checks = select(card_checks(card_facts(conn, day), now, tz))
        for evaluation in check_evaluations(checks, day):
            context.log_event(evaluation)
    return checks


def checks_while_scraping(checks: list[CardCheck]) -> list[CardCheck]:
    """The checks a combination records as soon as it stored the day's meetings, while others may still be retrying.

    `races_have_runners` and `start_times_on_day` judge what is stored, so they hold from the moment it is stored.
    `card_not_empty` judges the day once its scrape is done: a pass is already true, a failure (meetings without
    races so far) may still be filled by a combination that is retrying, so it is left to the summary step."""
    return [check for check in checks if check.passed or check.name != CARD_NOT_EMPTY]
