"""Due-minute computation (croniter) against a brute-force reference that compares the fields minute by minute."""

from __future__ import annotations

import datetime as dt
from zoneinfo import ZoneInfo

import pytest

from maintenance_jobs.schedule import (
    CronFields,
    cron_expression,
    due_minutes,
    local_iso,
    plan_window,
    wall_clock_slots,
)
from maintenance_jobs.seed import load_seed_tasks
from tests.host_timezone import host_timezone

pytestmark = pytest.mark.unit

UTC = dt.UTC
MINUTE = dt.timedelta(minutes=1)


def reference_due(fields: CronFields, start: dt.datetime, end: dt.datetime, timezone: str) -> list[dt.datetime]:
    """Independent evaluator: walk every real minute, read the local clock, compare the integers.

    DST rules written out directly: a fixed-hour task runs once per wall time (gap times at the first minute after the
    gap, repeated times at their first occurrence); an any-hour task follows the real clock.
    """
    zone = ZoneInfo(timezone)

    def matches(wall: dt.datetime) -> bool:
        return (
            fields.minute in (-1, wall.minute)
            and fields.hour in (-1, wall.hour)
            and fields.day_of_month in (-1, wall.day)
            and fields.month in (-1, wall.month)
            and fields.day_of_week in (-1, wall.weekday())
        )

    due = []
    real = start
    while real < end:
        local = real.astimezone(zone)
        before = (real - MINUTE).astimezone(zone)
        wall = local.replace(tzinfo=None)
        fixed_hour = fields.hour != -1
        hit = matches(wall) and not (fixed_hour and local.fold == 1)
        if fixed_hour and local.utcoffset() > before.utcoffset():
            skipped = before.replace(tzinfo=None) + MINUTE
            while skipped < wall:
                hit = hit or matches(skipped)
                skipped += MINUTE
        if hit:
            due.append(real)
        real += MINUTE
    return due


def minutes_between(start: dt.datetime, end: dt.datetime) -> list[dt.datetime]:
    return [start + MINUTE * i for i in range(int((end - start) / MINUTE))]


def computed_due(
    fields: CronFields, start: dt.datetime, end: dt.datetime, timezone: str, window: int = 60
) -> list[dt.datetime]:
    # Evaluate in windows (an hour, as catch-up ticks would), so window edges are exercised too.
    due, minutes = [], minutes_between(start, end)
    for i in range(0, len(minutes), window):
        due += due_minutes(fields, wall_clock_slots(minutes[i : i + window], timezone))
    return due


SEED_FIELDS = {spec.task_name: spec.cron_fields for spec in load_seed_tasks()}


@pytest.mark.parametrize("task_name", sorted(SEED_FIELDS))
def test_seed_tasks_over_a_month_match_the_reference(task_name: str) -> None:
    timezone = "Pacific/Auckland"
    # March 2024 in Auckland: 31 days, leap-year February just before it, and nothing special otherwise.
    start = dt.datetime(2024, 2, 28, 11, 0, tzinfo=UTC)
    end = start + dt.timedelta(days=31)
    fields = SEED_FIELDS[task_name]
    computed = computed_due(fields, start, end, timezone)
    assert computed == reference_due(fields, start, end, timezone)
    expected_count = {"test_example_task": 31 * 24 * 60, "backup_docker_configs_daily": 31,
                      "backup_postgres_nightly": 31}.get(task_name, 1)
    assert len(computed) == expected_count


@pytest.mark.parametrize(
    ("fields", "expected_local"),
    [
        # every minute: 60 runs in one hour
        (CronFields(), None),
        # daily 03:05
        (CronFields(minute=5, hour=3), ["2025-03-11T03:05+13:00"]),
        # 11th at 04:00 (and not on the 12th)
        (CronFields(minute=0, hour=4, day_of_month=11), ["2025-03-11T04:00+13:00"]),
    ],
)
def test_readme_examples_in_auckland(fields: CronFields, expected_local: list[str] | None) -> None:
    start = dt.datetime(2025, 3, 10, 13, 0, tzinfo=UTC)  # 2025-03-11 02:00 NZDT
    minutes = minutes_between(start, start + dt.timedelta(hours=24))
    due = due_minutes(fields, wall_clock_slots(minutes, "Pacific/Auckland"))
    if expected_local is None:
        assert len(due) == len(minutes)
    else:
        assert [local_iso(m, "Pacific/Auckland") for m in due] == expected_local


# Edges: leap day, 31st, Monday = 0 / Sunday = 6, Jan 1st, and both DST transitions in Auckland (2025-04-06 back,
# 2025-09-28 forward) for fixed-hour and any-hour tasks.
EDGE_CASES = [
    ("feb 29 leap year", CronFields(minute=0, hour=0, day_of_month=29, month=2), dt.datetime(2024, 1, 15)),
    ("feb 29 absent in 2025", CronFields(minute=0, hour=0, day_of_month=29, month=2), dt.datetime(2025, 1, 15)),
    ("31st skips short months", CronFields(minute=30, hour=12, day_of_month=31), dt.datetime(2025, 3, 20)),
    ("monday 09:00", CronFields(minute=0, hour=9, day_of_week=0), dt.datetime(2025, 6, 1)),
    ("sunday 23:59", CronFields(minute=59, hour=23, day_of_week=6), dt.datetime(2025, 6, 1)),
    ("13th AND friday", CronFields(minute=0, hour=12, day_of_month=13, day_of_week=4), dt.datetime(2025, 5, 20)),
    ("jan 1 midnight", CronFields(minute=0, hour=0, day_of_month=1, month=1), dt.datetime(2024, 12, 15)),
    ("fall back fixed 02:30", CronFields(minute=30, hour=2), dt.datetime(2025, 3, 25)),
    ("fall back any hour :30", CronFields(minute=30), dt.datetime(2025, 4, 1)),
    ("spring forward fixed 02:30", CronFields(minute=30, hour=2), dt.datetime(2025, 9, 20)),
    ("spring forward any minute of 02", CronFields(hour=2), dt.datetime(2025, 9, 20)),
    ("spring forward any hour :15", CronFields(minute=15), dt.datetime(2025, 9, 25)),
    ("spring forward yearly in the gap", CronFields(minute=0, hour=2, day_of_month=28, month=9), dt.datetime(2025, 9, 1)),
]


@pytest.mark.parametrize(("label", "fields", "local_start"), EDGE_CASES, ids=[c[0] for c in EDGE_CASES])
def test_edges_in_auckland_match_the_reference(label: str, fields: CronFields, local_start: dt.datetime) -> None:
    start = local_start.replace(tzinfo=ZoneInfo("Pacific/Auckland")).astimezone(UTC)
    end = start + dt.timedelta(days=40)
    computed = computed_due(fields, start, end, "Pacific/Auckland", window=360)
    assert computed == reference_due(fields, start, end, "Pacific/Auckland")


def test_dst_outcomes_are_the_documented_ones() -> None:
    # Concrete expectations, not only agreement with the reference.
    tz = "Pacific/Auckland"
    back = dt.datetime(2025, 4, 5, 12, 0, tzinfo=UTC)  # 2025-04-06 01:00 NZDT, clocks go back at 03:00
    fixed = computed_due(CronFields(minute=30, hour=2), back, back + dt.timedelta(hours=4), tz)
    assert [local_iso(m, tz) for m in fixed] == ["2025-04-06T02:30+13:00"]
    hourly = computed_due(CronFields(minute=30), back, back + dt.timedelta(hours=4), tz)
    assert [local_iso(m, tz) for m in hourly] == [
        "2025-04-06T01:30+13:00",
        "2025-04-06T02:30+13:00",
        "2025-04-06T02:30+12:00",
        "2025-04-06T03:30+12:00",
    ]
    forward = dt.datetime(2025, 9, 27, 12, 0, tzinfo=UTC)  # 2025-09-28 00:00 NZST, clocks jump 02:00 -> 03:00
    gap = computed_due(CronFields(minute=30, hour=2), forward, forward + dt.timedelta(hours=5), tz)
    assert [local_iso(m, tz) for m in gap] == ["2025-09-28T03:00+13:00"]
    yearly = computed_due(CronFields(minute=0, hour=2, day_of_month=28, month=9), forward, forward + dt.timedelta(hours=5), tz)
    assert [local_iso(m, tz) for m in yearly] == ["2025-09-28T03:00+13:00"]


@pytest.mark.parametrize(
    ("fields", "expression"),
    [
        (CronFields(), "* * * * *"),
        (CronFields(minute=5, hour=3), "5 3 * * *"),
        (CronFields(day_of_week=0), "* * * * 1"),  # Monday
        (CronFields(day_of_week=6), "* * * * 0"),  # Sunday
        (CronFields(minute=0, hour=4, day_of_month=11, month=12), "0 4 11 12 *"),
    ],
)
def test_cron_expression(fields: CronFields, expression: str) -> None:
    assert cron_expression(fields) == expression


NOW = dt.datetime(2025, 6, 1, 12, 0, 42, tzinfo=UTC)


@pytest.mark.parametrize(
    ("cursor", "max_catchup", "first", "count", "skipped"),
    [
        (None, 60, "12:00", 1, 0),  # first tick: only the current minute
        (NOW - dt.timedelta(minutes=1), 60, "12:00", 1, 0),  # normal tick
        (NOW.replace(second=0), 60, None, 0, 0),  # second tick in the same minute: nothing new
        (NOW + dt.timedelta(minutes=5), 60, None, 0, 0),  # clock went back: nothing, cursor kept
        (NOW - dt.timedelta(minutes=10), 60, "11:51", 10, 0),  # short downtime: every minute caught up
        (NOW - dt.timedelta(hours=3), 60, "11:01", 60, 120),  # long downtime: bounded, the rest counted
        (NOW - dt.timedelta(minutes=10), 1, "12:00", 1, 9),  # a bound of one: only the current minute
        (NOW - dt.timedelta(minutes=10), 0, "12:00", 1, 9),  # a bound below one still evaluates the current minute
        (NOW - dt.timedelta(minutes=10), 2, "11:59", 2, 8),
    ],
)
def test_plan_window(cursor, max_catchup, first, count, skipped) -> None:
    window = plan_window(cursor, NOW, max_catchup)
    assert len(window.minutes) == count
    assert window.skipped_minutes == skipped
    if first:
        assert window.minutes[0].strftime("%H:%M") == first
        assert window.minutes[-1] == NOW.replace(second=0)
    expected_cursor = max(NOW.replace(second=0), (cursor or NOW).replace(second=0))
    assert window.cursor == expected_cursor


def test_the_window_is_whole_utc_minutes_on_any_host() -> None:
    """The dispatcher's cursor (shown in its skip reasons) and its minutes are whole minutes in UTC."""
    now = dt.datetime(2025, 6, 1, 12, 0, 42, 500_000, tzinfo=UTC)
    with host_timezone("Pacific/Auckland"):
        first = plan_window(None, now, 60)
        later = plan_window(now - dt.timedelta(minutes=2), now, 60)
    assert [m.isoformat() for m in first.minutes] == ["2025-06-01T12:00:00+00:00"]
    assert first.cursor.isoformat() == "2025-06-01T12:00:00+00:00"
    assert [m.isoformat() for m in later.minutes] == ["2025-06-01T11:59:00+00:00", "2025-06-01T12:00:00+00:00"]


def test_the_minute_after_a_spring_forward_notes_the_wall_times_jumped_over() -> None:
    tz = "Pacific/Auckland"
    before = dt.datetime(2025, 9, 27, 13, 59, tzinfo=UTC)  # 2025-09-28 01:59 NZST; the next minute is 03:00 NZDT
    slots = wall_clock_slots([before, before + MINUTE, before + 2 * MINUTE], tz)
    assert [s.wall for s in slots] == [dt.datetime(2025, 9, 28, 1, 59), dt.datetime(2025, 9, 28, 3, 0),
                                       dt.datetime(2025, 9, 28, 3, 1)]
    assert slots[0].skipped_walls == () and slots[2].skipped_walls == ()
    assert slots[1].skipped_walls == tuple(dt.datetime(2025, 9, 28, 2, 0) + MINUTE * i for i in range(60))


def test_a_daily_task_after_the_gap_runs_once_at_its_own_time() -> None:
    tz = "Pacific/Auckland"
    forward = dt.datetime(2025, 9, 27, 12, 0, tzinfo=UTC)  # 2025-09-28 00:00 NZST
    due = computed_due(CronFields(minute=0, hour=5), forward, forward + dt.timedelta(hours=8), tz)
    assert [local_iso(m, tz) for m in due] == ["2025-09-28T05:00+13:00"]


def test_a_gap_is_noted_only_at_the_minute_right_after_it() -> None:
    """Minutes that are not consecutive (a sparse list) each compare with their own previous real minute."""
    tz = "Pacific/Auckland"
    one_am = dt.datetime(2025, 9, 27, 13, 0, tzinfo=UTC)  # 2025-09-28 01:00 NZST
    half_past_three = dt.datetime(2025, 9, 27, 14, 30, tzinfo=UTC)  # 03:30 NZDT, half an hour after the jump
    slots = wall_clock_slots([one_am, half_past_three], tz)
    assert [s.skipped_walls for s in slots] == [(), ()]
