"""Helpers of the checkpoint tests: a controllable clock and seeding the race database from the simulated feed."""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass

from racing_orchestration.race_db.resource import RaceDatabase
from racing_orchestration.race_db.store import upsert_meetings
from racing_orchestration.tab.models import parse_event_response, parse_meetings_response
from racing_orchestration.tab.sim_day import SimMeeting, SimRace
from racing_orchestration.tab.sim_engine import API_PREFIX, SimFeed


@dataclass
class Clock:
    """A clock the test moves by hand."""

    now: dt.datetime

    def __call__(self) -> dt.datetime:
        return self.now

    def advance(self, **delta: float) -> dt.datetime:
        self.now += dt.timedelta(**delta)
        return self.now

    def sleep(self, seconds: float) -> None:
        self.advance(seconds=seconds)


class RunClock:
    """`fetch.CLOCK` (the runs' `now()` and `sleep()`) on a test's Clock: a run's wait for its target moves the fake
    time instead of sleeping."""

    def __init__(self, clock: Clock) -> None:
        self.clock = clock

    def now(self) -> dt.datetime:
        return self.clock.now

    def sleep(self, seconds: float) -> None:
        self.clock.sleep(seconds)


class DagsterRetryClock:
    """The clock Dagster's in-process executor reads between step retries, faked: a step up for retry is due at
    `time() + delay`, and the executor sleeps until then. Here `sleep` records the wait and moves the clock instead,
    so a RetryPolicy's real delays (minutes) are asserted without waiting."""

    # Dagster 1.13: ActiveExecution (dagster/_core/execution/plan/active.py) schedules retries with time.time() and
    # waits in sleep_til_ready() with time.sleep(); the step workers themselves never read this module attribute.
    MODULE = "dagster._core.execution.plan.active"

    def __init__(self, start: float = 1_800_000_000.0) -> None:
        self.now = start
        self.waits: list[float] = []

    def time(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.waits.append(seconds)
        self.now += seconds

    @classmethod
    def install(cls, monkeypatch) -> DagsterRetryClock:
        import importlib
        import inspect

        clock = cls()
        module = importlib.import_module(cls.MODULE)
        # If Dagster moves its retry wait, fail here rather than really wait (30 minutes for the morning scrape).
        assert hasattr(module, "time"), f"{cls.MODULE} no longer uses the time module: find Dagster's retry wait again"
        assert "time.sleep" in inspect.getsource(module.ActiveExecution.sleep_til_ready)
        assert "time.time() + dagster_event.step_retry_data.seconds_to_wait" in inspect.getsource(
            module.ActiveExecution.handle_event)
        monkeypatch.setattr(module, "time", clock)
        return clock


def get_json(feed: SimFeed, path: str) -> object:
    import json

    response = feed.handle("GET", API_PREFIX + path, {})
    assert response.status == 200, (path, response.status, response.body[:200])
    return json.loads(response.body)


def seed_day(feed: SimFeed, race_db: RaceDatabase, day: dt.date, countries=("NZ", "AUS")) -> int:
    """The morning scrape's store step for `day`, fed from the simulated feed at its current time."""
    races = 0
    with race_db.begin() as conn:
        for country in countries:
            for category in ("T", "H", "G"):
                payload = get_json(feed, f"/meetings?date_from={day}&date_to={day}&category={category}&country={country}&limit=200")
                races += upsert_meetings(conn, parse_meetings_response(payload)).races
    return races


def fetch_event(feed: SimFeed, race_id: str):
    return parse_event_response(get_json(feed, f"/events/{race_id}"))


def pick_race(meetings: list[SimMeeting], *, abandoned: bool = False, delayed: bool = False,
              countries: tuple[str, ...] = ("NZ",)) -> tuple[SimMeeting, SimRace]:
    for meeting in meetings:
        if meeting.country not in countries:
            continue
        for race in meeting.races:
            if (race.abandoned_at is not None) == abandoned and bool(race.delay) == delayed:
                return meeting, race
    raise AssertionError("no such race in the simulated day")
