"""The morning scrape's freshness alert allows its own retry window: an ordinary retried morning does not alert."""

from __future__ import annotations

import datetime as dt
from zoneinfo import ZoneInfo

import pytest
from croniter import croniter

from orchestration_core.audit.alerts import FRESHNESS_EXPECTATIONS, DailyDeadline, missed_windows
from racing_orchestration.ingestion.jobs import (
    COMBINATION_MAX_RETRIES,
    COMBINATION_RETRY_DELAY_SECONDS,
    morning_scrape_schedule,
)

pytestmark = pytest.mark.unit
TZ = ZoneInfo("Pacific/Auckland")
[DEADLINE] = [e for e in FRESHNESS_EXPECTATIONS if isinstance(e, DailyDeadline) and e.job_name == "morning_scrape"]


def scheduled_at() -> dt.datetime:
    return croniter(morning_scrape_schedule.cron_schedule, dt.datetime(2026, 12, 1)).get_next(dt.datetime)


def test_the_deadline_covers_the_retry_window_and_the_last_attempt() -> None:
    last_attempt = scheduled_at() + dt.timedelta(seconds=COMBINATION_MAX_RETRIES * COMBINATION_RETRY_DELAY_SECONDS)
    deadline = dt.datetime.combine(last_attempt.date(), DEADLINE.deadline)
    assert deadline - last_attempt >= dt.timedelta(minutes=20), (last_attempt, deadline)


@pytest.mark.parametrize(
    ("succeeded_at", "missed"),
    [
        (dt.time(6, 4), False),  # a clean morning
        (dt.time(7, 36), False),  # three retries, 30 minutes apart (failed or still-empty combinations)
        (None, True),  # no success by the deadline
    ],
)
def test_an_ordinary_retried_morning_does_not_alert(succeeded_at: dt.time | None, missed: bool) -> None:
    day = dt.date(2026, 12, 2)
    ends = [dt.datetime.combine(day, succeeded_at, tzinfo=TZ)] if succeeded_at else []
    now = dt.datetime.combine(day, DEADLINE.deadline, tzinfo=TZ) + dt.timedelta(minutes=5)
    found = missed_windows([DEADLINE], now, {"morning_scrape": ends}, now - dt.timedelta(days=3), TZ)
    assert bool(found) is missed
