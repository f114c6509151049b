"""The per-task history's expected runs cost in proportion to the runs expected, not to the minutes of the range; and
they are exactly the minutes the dispatcher's rule picks when applied to every minute (daylight saving in several
zones, a skipped day, half-hour and 45-minute offsets)."""

from __future__ import annotations

import datetime as dt
from zoneinfo import ZoneInfo

import pytest

from maintenance_jobs.execution_history import task_view
from maintenance_jobs.execution_history.task_view import expected_minutes
from maintenance_jobs.models import Task
from maintenance_jobs.schedule import ONE_MINUTE, due_minutes, wall_clock_slots
from tests.task_rows import task_data

pytestmark = pytest.mark.unit
CREATED = dt.datetime(2000, 1, 1, tzinfo=dt.UTC)
DAY = dt.timedelta(days=1)


def task(**fields) -> Task:
    return Task.model_validate(task_data("t", **fields) | {"id": 1, "created_at": CREATED, "updated_at": CREATED})


def every_minute_rule(fields: dict, start: dt.datetime, end: dt.datetime, timezone: str) -> list[dt.datetime]:
    """The dispatcher's rule applied to every real minute of [start, end): the reference."""
    minutes = [start + ONE_MINUTE * i for i in range((end - start) // ONE_MINUTE)]
    return due_minutes(task(**fields).cron_fields, wall_clock_slots(minutes, timezone))


# (zone, a local day with a transition): spring forward and fall back where the zone has them.
TRANSITIONS = [
    ("Pacific/Auckland", "2025-09-28"), ("Pacific/Auckland", "2025-04-06"),
    ("America/New_York", "2025-03-09"), ("America/New_York", "2025-11-02"),
    ("Europe/London", "2025-03-30"), ("Europe/London", "2025-10-26"),
    ("Australia/Lord_Howe", "2025-10-05"), ("Australia/Lord_Howe", "2025-04-06"),  # 30-minute shifts
    ("Pacific/Chatham", "2025-09-28"), ("Pacific/Chatham", "2025-04-06"),  # +12:45 / +13:45
    ("America/Sao_Paulo", "2018-11-04"), ("America/Sao_Paulo", "2019-02-17"),  # at midnight
    ("Pacific/Apia", "2011-12-30"),  # a whole day skipped (the date line moved)
    ("Asia/Kolkata", "2025-06-01"),  # none
]
SCHEDULES = [
    {"minute": 30, "hour": 2}, {"minute": 0, "hour": 0}, {"minute": 45, "hour": 2}, {"minute": 15, "hour": 23},
    {"minute": 30}, {"minute": 0}, {"hour": 2}, {"hour": 0},
    {"minute": 0, "hour": 12, "day_of_month": 30}, {"minute": 10, "hour": 1, "day_of_week": 6},
]


@pytest.mark.parametrize("fields", SCHEDULES, ids=lambda f: ",".join(f"{k}={v}" for k, v in f.items()))
@pytest.mark.parametrize(("zone", "day"), TRANSITIONS, ids=lambda v: str(v))
def test_expected_runs_equal_the_rule_applied_to_every_minute(zone: str, day: str, fields: dict) -> None:
    start = dt.datetime.fromisoformat(day).replace(tzinfo=ZoneInfo(zone)).astimezone(dt.UTC) - DAY
    end = start + 3 * DAY
    assert expected_minutes(task(**fields), start, end, zone) == every_minute_rule(fields, start, end, zone)


def test_a_99_day_range_over_both_transitions_equals_the_rule() -> None:
    start, end = dt.datetime(2025, 3, 20, 0, 7, tzinfo=dt.UTC), dt.datetime(2025, 6, 27, 0, 7, tzinfo=dt.UTC)
    for fields in ({"minute": 30, "hour": 2}, {"minute": 5, "hour": 3, "day_of_week": 0}):
        expected = expected_minutes(task(**fields), start, end, "Pacific/Auckland")
        assert expected == every_minute_rule(fields, start, end, "Pacific/Auckland") and expected


def minutes_evaluated(monkeypatch: pytest.MonkeyPatch, fields: dict, days: float) -> tuple[int, int]:
    """(expected runs, real minutes the dispatcher's rule was applied to) for a range of `days` days."""
    evaluated = []

    def counting(minutes, timezone):
        evaluated.append(len(minutes))
        return wall_clock_slots(minutes, timezone)

    monkeypatch.setattr(task_view, "wall_clock_slots", counting)
    until = dt.datetime(2025, 6, 30, 12, tzinfo=dt.UTC)  # a Monday, after the weekly run's minute
    found = expected_minutes(task(**fields), until - dt.timedelta(days=days), until, "Pacific/Auckland")
    return len(found), sum(evaluated)


@pytest.mark.parametrize(("fields", "runs_99", "runs_1", "max_ratio"), [
    ({"minute": 5, "hour": 3, "day_of_week": 0}, 15, 1, 20),  # weekly, Mondays 03:05
    ({"minute": 0, "hour": 4, "day_of_month": 1}, 3, 0, 10),  # monthly
    ({"minute": 30, "hour": 2}, 99, 1, 120),  # daily: 99 times the runs, 99 times the work
])
def test_the_work_follows_the_runs_expected_not_the_minutes(monkeypatch: pytest.MonkeyPatch, fields: dict,
                                                             runs_99: int, runs_1: int, max_ratio: int) -> None:
    runs, work = minutes_evaluated(monkeypatch, fields, 99)
    day_runs, day_work = minutes_evaluated(monkeypatch, fields, 1)
    assert (runs, day_runs) == (runs_99, runs_1)
    # Evaluating every minute: 142,560 minutes for 99 days, 1,440 for one (a ratio of 99 whatever the schedule).
    assert work <= 2 * runs + 4 and day_work <= 2 * day_runs + 4, (work, day_work)
    assert work <= max_ratio * max(day_work, 1), (work, day_work)


def test_a_range_with_too_many_runs_stops_early(monkeypatch: pytest.MonkeyPatch) -> None:
    # Every minute of hour 2, every day: 60 a day. Asked for at most 100, it computes about that many, not 5,940.
    runs, work = minutes_evaluated(monkeypatch, {"hour": 2}, 99)
    assert runs == 99 * 60 and work >= runs  # unbounded: all of them
    monkeypatch.undo()
    limited = expected_minutes(task(hour=2), dt.datetime(2025, 3, 23, tzinfo=dt.UTC),
                               dt.datetime(2025, 6, 30, tzinfo=dt.UTC), "Pacific/Auckland", limit=100)
    assert len(limited) == 101
    every = expected_minutes(task(), dt.datetime(2025, 3, 23, tzinfo=dt.UTC), dt.datetime(2025, 6, 30, tzinfo=dt.UTC),
                             "UTC", limit=10_000)
    assert len(every) == 10_001
