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
