"""Pure parts of the execution history: stable ids, the expected runs of a schedule (the dispatcher's own DST rules),
the reasons given for missed runs, and the CLI's time arguments."""

from __future__ import annotations

import argparse
import datetime as dt
from zoneinfo import ZoneInfo

import pytest

from maintenance_jobs.cli import parse_moment
from maintenance_jobs.execution_history.store import Skip
from maintenance_jobs.execution_history.summary import execution_id
from maintenance_jobs.execution_history.tag_values import scheduled_minute
from maintenance_jobs.execution_history.task_view import InvalidRange, _missed_reason, bounded, expected_minutes
from maintenance_jobs.models import Task
from maintenance_jobs.schedule import due_minutes, plan_window, wall_clock_slots
from tests.task_rows import task_data

pytestmark = pytest.mark.unit
TZ = "Pacific/Auckland"
ZONE = ZoneInfo(TZ)
CREATED = dt.datetime(2024, 1, 1, tzinfo=dt.UTC)


def task(**fields) -> Task:
    return Task.model_validate(task_data("t", **fields) | {"id": 1, "created_at": CREATED, "updated_at": CREATED})


def local(text: str) -> dt.datetime:
    return dt.datetime.fromisoformat(text).replace(tzinfo=ZONE).astimezone(dt.UTC)


def test_execution_ids_are_53_bit_and_distinct() -> None:
    # Stable across processes and releases: tests/maintenance_jobs/test_execution_ids.py pins them as literals.
    ids = {execution_id(f"run-{i}") for i in range(10_000)}
    assert len(ids) == 10_000 and all(0 < i < 2**53 for i in ids)
    assert len({execution_id("abc", attempt) for attempt in range(100)}) == 100  # each attempt an id of its own


@pytest.mark.parametrize(
    ("fields", "start", "end", "expected"),
    [
        # Spring forward (28 Sep 2025, 02:00 -> 03:00): a fixed 02:30 runs at the first minute after the gap.
        ({"minute": 30, "hour": 2}, "2025-09-27T00:00", "2025-09-29T00:00", ["2025-09-27T02:30", "2025-09-28T03:00"]),
        # Fall back (6 Apr 2025, 03:00 -> 02:00): a fixed 02:30 runs once ...
        ({"minute": 30, "hour": 2}, "2025-04-06T00:00", "2025-04-06T04:00", ["2025-04-06T02:30"]),
        # ... an any-hour :30 runs at both 02:30s (the real clock), 01:30 and 03:30.
        ({"minute": 30}, "2025-04-06T01:00", "2025-04-06T04:00", ["2025-04-06T01:30", "2025-04-06T02:30",
                                                                  "2025-04-06T02:30+12:00", "2025-04-06T03:30"]),
        ({"minute": 5, "hour": 3, "day_of_week": 0}, "2025-06-01T00:00", "2025-06-15T00:00",
         ["2025-06-02T03:05", "2025-06-09T03:05"]),  # Mondays
        ({}, "2025-06-01T00:00", "2025-06-01T00:03", ["2025-06-01T00:00", "2025-06-01T00:01", "2025-06-01T00:02"]),
    ],
)
def test_expected_runs_follow_the_dispatchers_rules(fields, start, end, expected) -> None:
    minutes = expected_minutes(task(**fields), local(start), local(end), TZ)
    want = [dt.datetime.fromisoformat(e).astimezone(dt.UTC) if "+" in e else local(e) for e in expected]
    assert minutes == want
    # The dispatcher, ticking minute by minute over the same span, launches exactly these.
    window = plan_window(local(start) - dt.timedelta(minutes=1), local(end) - dt.timedelta(minutes=1), 10**6)
    assert due_minutes(task(**fields).cron_fields, wall_clock_slots(window.minutes, TZ)) == minutes


def test_expected_runs_start_at_the_next_whole_minute() -> None:
    start = local("2025-06-01T03:04:30")
    assert expected_minutes(task(minute=5, hour=3), start, start + dt.timedelta(minutes=2), TZ) == [
        local("2025-06-01T03:05")]
    assert expected_minutes(task(minute=4, hour=3), start, start + dt.timedelta(minutes=2), TZ) == []


def test_missed_runs_say_why() -> None:
    minute = local("2025-06-02T03:05")
    skip = Skip(minute - dt.timedelta(hours=2), minute + dt.timedelta(hours=1), "the dispatcher was not evaluating")
    assert _missed_reason(minute, [skip], task()).startswith("skipped by the dispatcher: the dispatcher was not")
    assert "recorded no skip" in _missed_reason(minute + dt.timedelta(hours=1), [skip], task())
    changed = task().model_copy(update={"updated_at": minute + dt.timedelta(days=1)})
    assert "the task was changed at" in _missed_reason(minute, [], changed)


@pytest.mark.parametrize(
    ("text", "expected"),
    [("30d", dt.datetime(2025, 5, 3, 12, tzinfo=dt.UTC)), ("12h", dt.datetime(2025, 6, 2, tzinfo=dt.UTC)),
     ("90m", dt.datetime(2025, 6, 2, 10, 30, tzinfo=dt.UTC)), ("2w", dt.datetime(2025, 5, 19, 12, tzinfo=dt.UTC)),
     ("now", dt.datetime(2025, 6, 2, 12, tzinfo=dt.UTC)),
     ("2025-06-01", dt.datetime(2025, 6, 1, tzinfo=ZONE)),  # midnight in the maintenance timezone
     ("2025-06-01T03:00", dt.datetime(2025, 6, 1, 3, tzinfo=ZONE)),
     ("2025-06-01T03:00+00:00", dt.datetime(2025, 6, 1, 3, tzinfo=dt.UTC))],
)
def test_cli_time_arguments(text: str, expected: dt.datetime) -> None:
    assert parse_moment(text, dt.datetime(2025, 6, 2, 12, tzinfo=dt.UTC), TZ) == expected


@pytest.mark.parametrize("text", ["yesterday", "30", "-3d", "3y", ""])
def test_cli_refuses_other_time_arguments(text: str) -> None:
    with pytest.raises(argparse.ArgumentTypeError, match="30d"):
        parse_moment(text, dt.datetime(2025, 6, 2, 12, tzinfo=dt.UTC), TZ)


@pytest.mark.parametrize("moment", [dt.datetime(1, 1, 1, tzinfo=dt.timezone(dt.timedelta(hours=5))),
                                    dt.datetime(1969, 12, 31, tzinfo=dt.UTC),
                                    dt.datetime(9999, 12, 31, 23, tzinfo=dt.timezone(dt.timedelta(hours=-5)))])
def test_out_of_range_times_are_refused_with_the_field(moment: dt.datetime) -> None:
    with pytest.raises(InvalidRange) as refused:
        bounded(moment, "until")
    assert refused.value.field == "until"


@pytest.mark.parametrize(("tag", "expected"), [
    ("2025-06-03T03:05+12:00", dt.datetime(2025, 6, 2, 15, 5, tzinfo=dt.UTC)), (None, None), ("garbage", None),
    ("2025-06-03T03:05", None)])  # without an offset the minute is ambiguous: not matched to a slot
def test_scheduled_minute_tag(tag, expected) -> None:
    assert scheduled_minute(tag) == expected
