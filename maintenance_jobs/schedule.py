"""When a task is due: its cron fields read as wall-clock time in a named timezone, evaluated with croniter.

Field convention (the old scheduler's): each field is an integer or -1 for "any"; day_of_week 0 = Monday; when both
day_of_month and day_of_week are set, BOTH must match (the old SQL matched every field; cron's "either" is not used).

Daylight-saving time follows Vixie cron: tasks with a fixed hour run once per wall-clock time (a time skipped by the
spring-forward gap runs at the first minute after the gap; a time repeated by the fall-back hour runs only at its first
occurrence); tasks whose hour is "any" follow the real clock (skipped minutes do not run, repeated minutes run twice).

croniter is used on naive wall-clock times only, because its tz-aware iteration misbehaves inside DST gaps.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from zoneinfo import ZoneInfo

from croniter import CroniterBadDateError, croniter

ANY = -1
ONE_MINUTE = dt.timedelta(minutes=1)


@dataclass(frozen=True)
class CronFields:
    minute: int = ANY
    hour: int = ANY
    day_of_month: int = ANY
    month: int = ANY
    day_of_week: int = ANY  # 0 = Monday … 6 = Sunday


def cron_expression(fields: CronFields) -> str:
    """The five-field cron expression of `fields` (cron counts weekdays from Sunday = 0)."""

    def part(value: int) -> str:
        return "*" if value == ANY else str(value)

    dow = "*" if fields.day_of_week == ANY else str((fields.day_of_week + 1) % 7)
    return " ".join([part(fields.minute), part(fields.hour), part(fields.day_of_month), part(fields.month), dow])


def floor_minute(moment: dt.datetime) -> dt.datetime:
    return moment.astimezone(dt.UTC).replace(second=0, microsecond=0)


@dataclass(frozen=True)
class Slot:
    """One real minute (UTC) as the local wall clock shows it."""

    real: dt.datetime  # aware, UTC
    wall: dt.datetime  # naive local time
    repeated: bool  # second occurrence of this wall time (fall-back hour)
    skipped_walls: tuple[dt.datetime, ...]  # wall times the clock jumped over just before this minute


def wall_clock_slots(minutes: Sequence[dt.datetime], timezone: str) -> list[Slot]:
    """Map real minutes to wall-clock slots in `timezone`, noting DST gaps and repeats."""
    zone = ZoneInfo(timezone)
    slots: list[Slot] = []
    local = None
    for real in minutes:
        consecutive = local is not None and real - slots[-1].real == ONE_MINUTE
        previous = local if consecutive else (real - ONE_MINUTE).astimezone(zone)
        local = real.astimezone(zone)
        skipped: tuple[dt.datetime, ...] = ()
        if local.utcoffset() > previous.utcoffset():  # the clock jumped forward just before this minute
            wall_prev = previous.replace(tzinfo=None)
            gap = int((local.utcoffset() - previous.utcoffset()) / ONE_MINUTE)
            skipped = tuple(wall_prev + ONE_MINUTE * (i + 1) for i in range(gap))
        slots.append(Slot(real, local.replace(tzinfo=None), bool(local.fold), skipped))
    return slots


def walls_matching(expression: str, low: dt.datetime, high: dt.datetime) -> Iterator[dt.datetime]:
    """The naive wall times in [low, high] that `expression` matches, in order, one croniter step each: the work
    follows the matches, not the minutes of the span."""
    try:
        cron = croniter(expression, low - ONE_MINUTE, day_or=False)
        while (moment := cron.get_next(dt.datetime)) <= high:
            yield moment
    except CroniterBadDateError:  # no later date exists (validation refuses such schedules): no more matches
        return


def matching_walls(expression: str, walls: Iterable[dt.datetime]) -> set[dt.datetime]:
    """The wall times among `walls` that `expression` matches, by iterating croniter over their span."""
    walls = set(walls)
    if not walls:
        return set()
    return {moment for moment in walls_matching(expression, min(walls), max(walls)) if moment in walls}


def due_minutes(fields: CronFields, slots: Sequence[Slot]) -> list[dt.datetime]:
    """The real minutes (UTC) among `slots` at which a task with `fields` is due."""
    walls = [s.wall for s in slots] + [w for s in slots for w in s.skipped_walls]
    matched = matching_walls(cron_expression(fields), walls)
    fixed_hour = fields.hour != ANY
    due = []
    for slot in slots:
        on_time = slot.wall in matched and not (fixed_hour and slot.repeated)
        caught_up = fixed_hour and any(w in matched for w in slot.skipped_walls)
        if on_time or caught_up:
            due.append(slot.real)
    return due


@dataclass(frozen=True)
class TickWindow:
    """The minutes one dispatcher tick evaluates, and the cursor it leaves behind."""

    minutes: list[dt.datetime]
    skipped_minutes: int
    cursor: dt.datetime | None


def plan_window(cursor: dt.datetime | None, now: dt.datetime, max_catchup_minutes: int) -> TickWindow:
    """Minutes in (cursor, now], at most the newest `max_catchup_minutes`; the first tick evaluates only `now`."""
    end = floor_minute(now)
    if cursor is None:
        return TickWindow([end], 0, end)
    cursor = floor_minute(cursor)
    if cursor >= end:  # same minute again, or the clock went back: nothing new, keep the cursor
        return TickWindow([], 0, cursor)
    pending = int((end - cursor) / ONE_MINUTE)
    count = min(pending, max(1, max_catchup_minutes))
    minutes = [end - ONE_MINUTE * i for i in reversed(range(count))]
    return TickWindow(minutes, pending - count, end)


def local_iso(real: dt.datetime, timezone: str) -> str:
    """A minute as local ISO time with its UTC offset (unambiguous in the fall-back hour)."""
    return real.astimezone(ZoneInfo(timezone)).isoformat(timespec="minutes")
