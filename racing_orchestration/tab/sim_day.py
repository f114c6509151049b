"""The simulated feed's racing day: a deterministic card per (seed, meeting-local date), and its state at any time."""

from __future__ import annotations

import datetime as dt
import math
import random
import uuid
from dataclasses import dataclass
from zoneinfo import ZoneInfo

from racing_orchestration.tab.models import ABANDONED, CLOSED, FINAL, INTERIM, OPEN

NZ_TZ = ZoneInfo("Pacific/Auckland")
CATEGORY_NAMES = {"T": "Thoroughbred Horse Racing", "H": "Harness Horse Racing", "G": "Greyhounds"}
# category -> (first race local hour range, minutes between races, distances, runners per race)
CATEGORY_SHAPE = {
    "T": ((11, 13), (28, 36), (1000, 1200, 1400, 1600, 1700, 2000, 2200, 2400), (6, 14)),
    "H": ((16, 18), (24, 30), (1609, 1950, 2200, 2600, 2700), (6, 12)),
    "G": ((17, 19), (16, 20), (295, 305, 331, 407, 520, 600), (6, 8)),
}
# country -> (timezone, states, {category: (min meetings, max meetings, venues)}); absent categories have no racing.
COUNTRIES: dict[str, tuple[str, tuple[str, ...], dict[str, tuple[int, int, tuple[str, ...]]]]] = {
    "NZ": ("Pacific/Auckland", ("NZ",), {
        "T": (1, 2, ("Awapuni", "Ellerslie", "Riccarton Park", "Trentham", "Te Rapa", "Otaki")),
        "H": (1, 2, ("Addington", "Alexandra Park", "Cambridge", "Forbury Park")),
        "G": (1, 2, ("Addington Dogs", "Manukau", "Ascot Park", "Hatrick"))}),
    "AUS": ("Australia/Sydney", ("NSW", "VIC", "QLD", "SA", "WA"), {
        "T": (3, 5, ("Randwick", "Flemington", "Eagle Farm", "Doomben", "Caulfield", "Rosehill", "Ballarat")),
        "H": (2, 4, ("Menangle", "Melton", "Albion Park", "Gloucester Park", "Bathurst")),
        "G": (3, 6, ("Wentworth Park", "Sandown Park", "The Meadows", "Angle Park", "Cannington", "Richmond"))}),
    "UK": ("Europe/London", ("UK",), {
        "T": (2, 4, ("Ascot", "York", "Newmarket", "Goodwood", "Chester")),
        "G": (2, 4, ("Romford", "Towcester", "Monmore", "Nottingham", "Hove"))}),
    "IRE": ("Europe/Dublin", ("IRE",), {
        "T": (0, 2, ("Leopardstown", "Curragh", "Galway")), "G": (1, 2, ("Shelbourne Park", "Curraheen Park"))}),
    "FR": ("Europe/Paris", ("FR",), {
        "T": (1, 2, ("Longchamp", "Chantilly", "Deauville")), "H": (1, 2, ("Vincennes", "Enghien", "Cabourg"))}),
    "USA": ("America/New_York", ("NY", "FL", "CA", "KY"), {
        "T": (2, 4, ("Belmont", "Saratoga", "Gulfstream", "Santa Anita", "Del Mar")),
        "H": (1, 2, ("Meadowlands", "Yonkers"))}),
    "JPN": ("Asia/Tokyo", ("JPN",), {"T": (0, 2, ("Tokyo", "Kyoto", "Hakodate"))}),
}
_WORDS_A = ("Silver", "Rapid", "Golden", "Lucky", "Midnight", "Royal", "Storm", "Bold", "Quiet", "Flying", "Kiwi")
_WORDS_B = ("Arrow", "Comet", "Legend", "Spirit", "Echo", "Harbour", "Dancer", "Falcon", "Ruler", "Breeze", "Tiger")
_PEOPLE = ("Kate Hercock", "Liam Kauri", "Opie Bosson", "Sam Weatherley", "Ashvin Goindasamy", "Danielle Johnson",
           "Craig Grylls", "Vinnie Colgan", "Lisa Allpress", "Michael McNab", "Ryan Elliot", "Kozzi Asano")
_SPONSORS = ("PRYDA", "TAB", "SKY SPORT", "LION RED", "HOLCIM", "ROYAL WOLF", "TRACKSIDE", "ELDERS")
TRACK_CONDITIONS = {"T": ("Good 4", "Soft 5", "Heavy 8", "Synthetic"), "H": ("Fast", "Good"), "G": ("Fast", "Good")}
_RACE_KINDS = {"T": "HANDICAP", "H": "MOBILE PACE", "G": "STAKES"}


@dataclass(frozen=True)
class SimRunner:
    entrant_id: str
    number: int
    name: str
    barrier: int
    jockey: str
    trainer: str
    base_win: float  # fixed-win price when the market opens
    drift: float  # log change of the price by the jump
    scratched_at: dt.datetime | None
    late_scratch: bool

    def scratched(self, now: dt.datetime) -> bool:
        return self.scratched_at is not None and now >= self.scratched_at


@dataclass(frozen=True)
class SimRace:
    race_id: str
    number: int
    name: str
    distance: int
    weather: str
    scheduled_start: dt.datetime
    delay: dt.timedelta  # a late start, announced shortly before the scheduled jump
    abandoned_at: dt.datetime | None
    jump_jitter: dt.timedelta  # actual start minus advertised start
    runners: tuple[SimRunner, ...]
    finish_order: tuple[int, ...]  # runner numbers, winner first
    margins: tuple[float, ...]

    def advertised_start(self, now: dt.datetime) -> dt.datetime:
        if self.delay and now >= self.scheduled_start - dt.timedelta(minutes=10):
            return self.scheduled_start + self.delay
        return self.scheduled_start

    def jump(self) -> dt.datetime:
        return self.scheduled_start + self.delay

    def status(self, now: dt.datetime, interim_after: dt.timedelta, final_after: dt.timedelta) -> str:
        if self.abandoned_at is not None and now >= self.abandoned_at:
            return ABANDONED
        jump = self.jump()
        if now < jump:
            return OPEN
        if now < jump + interim_after:
            return CLOSED
        return INTERIM if now < jump + final_after else FINAL

    def price_factor(self, runner: SimRunner, now: dt.datetime) -> float:
        """Prices drift smoothly over the six hours before the jump, then freeze."""
        hours_to_jump = (self.jump() - now).total_seconds() / 3600
        progress = min(max(1 - hours_to_jump / 6, 0.0), 1.0)
        return math.exp(runner.drift * progress)


@dataclass(frozen=True)
class SimMeeting:
    meeting_id: str
    name: str
    date: dt.date
    category: str
    country: str
    state: str
    timezone: str
    track_condition: str
    races: tuple[SimRace, ...]


def _uuid(rng: random.Random) -> str:
    return str(uuid.UUID(int=rng.getrandbits(128), version=4))


def _runners(rng: random.Random, category: str, start: dt.datetime) -> tuple[tuple[SimRunner, ...], tuple[int, ...]]:
    low, high = CATEGORY_SHAPE[category][3]
    count = rng.randint(low, high)
    strengths = [rng.lognormvariate(0, 0.7) for _ in range(count)]
    total = sum(strengths)
    runners = []
    for number, strength in enumerate(strengths, start=1):
        scratched_at, late = None, False
        roll = rng.random()
        if roll < 0.04:
            scratched_at = start - dt.timedelta(hours=rng.randint(20, 40))
        elif roll < 0.055:
            scratched_at, late = start - dt.timedelta(minutes=rng.randint(12, 50)), True
        runners.append(SimRunner(
            entrant_id=_uuid(rng), number=number, name=f"{rng.choice(_WORDS_A)} {rng.choice(_WORDS_B)}",
            barrier=rng.randint(1, count), jockey=rng.choice(_PEOPLE), trainer=rng.choice(_PEOPLE),
            base_win=max(1.2, 0.85 * total / strength), drift=max(-0.6, min(0.6, rng.gauss(0, 0.2))),
            scratched_at=scratched_at, late_scratch=late,
        ))
    # The finish draws runners in proportion to their strength, so favourites win more often.
    pool = [(r.number, s) for r, s in zip(runners, strengths, strict=True) if r.scratched_at is None]
    order = []
    while pool:
        pick = rng.uniform(0, sum(s for _, s in pool))
        for i, (number, strength) in enumerate(pool):
            pick -= strength
            if pick <= 0 or i == len(pool) - 1:
                order.append(number)
                pool.pop(i)
                break
    return tuple(runners), tuple(order)


def make_race(rng: random.Random, category: str, number: int, start: dt.datetime, *, eventful: bool = True) -> SimRace:
    """One race; `eventful` races may be delayed or abandoned."""
    distance = rng.choice(CATEGORY_SHAPE[category][2])
    runners, order = _runners(rng, category, start)
    delay = dt.timedelta(minutes=rng.choice((2, 3, 5, 8))) if eventful and rng.random() < 0.06 else dt.timedelta()
    abandoned_at = start - dt.timedelta(minutes=rng.randint(5, 90)) if eventful and rng.random() < 0.03 else None
    return SimRace(
        race_id=_uuid(rng), number=number, distance=distance, weather=rng.choice(("Fine", "Overcast", "Showery")),
        name=f"{rng.choice(_SPONSORS)} {_RACE_KINDS[category]} {distance}", scheduled_start=start, delay=delay,
        abandoned_at=abandoned_at, jump_jitter=dt.timedelta(seconds=rng.randint(5, 150)), runners=runners,
        finish_order=order, margins=tuple(round(rng.uniform(0.1, 3.0), 1) for _ in order),
    )


def generate_day(seed: int, day: dt.date) -> list[SimMeeting]:
    """Every meeting whose local date is `day`, in every simulated country and category."""
    meetings = []
    for country, (tz_name, states, categories) in COUNTRIES.items():
        tz = ZoneInfo(tz_name)
        for category, (low, high, venues) in categories.items():
            rng = random.Random(f"{seed}:{day.isoformat()}:{country}:{category}")
            (first_low, first_high), (gap_low, gap_high), _, _ = CATEGORY_SHAPE[category]
            for venue in rng.sample(venues, min(rng.randint(low, high), len(venues))):
                first_time = dt.time(rng.randint(first_low, first_high), rng.choice((0, 15, 30, 45)))
                first = dt.datetime.combine(day, first_time, tz)
                gap = rng.randint(gap_low, gap_high)
                starts = [(first + dt.timedelta(minutes=gap * i)).astimezone(dt.UTC) for i in range(rng.randint(6, 12))]
                meeting_id = _uuid(rng)
                races = tuple(make_race(rng, category, n, start) for n, start in enumerate(starts, start=1))
                meetings.append(SimMeeting(
                    meeting_id=meeting_id, name=venue, date=day, category=category, country=country,
                    state=rng.choice(states), timezone=tz_name,
                    track_condition=rng.choice(TRACK_CONDITIONS[category]),
                    races=races,
                ))
    return meetings


def generate_dense(seed: int, first_start: dt.datetime, every: dt.timedelta, count: int) -> list[SimMeeting]:
    """A race every `every` from `first_start`, spread round-robin over NZ/AUS meetings of up to 10 races."""
    rng = random.Random(f"{seed}:dense:{first_start.isoformat()}")
    meeting_count = max(1, math.ceil(count / 10))
    slots: list[list[dt.datetime]] = [[] for _ in range(meeting_count)]
    for k in range(count):
        slots[k % meeting_count].append(first_start + every * k)
    meetings = []
    for index, starts in enumerate(slots):
        category, country = "THG"[index % 3], ("NZ", "AUS")[index // 3 % 2]
        races = tuple(make_race(rng, category, n, s, eventful=False) for n, s in enumerate(starts, start=1))
        meetings.append(SimMeeting(
            meeting_id=_uuid(rng), name=f"Dense Park {index + 1}", date=starts[0].astimezone(NZ_TZ).date(),
            category=category, country=country, state=country, timezone=COUNTRIES[country][0],
            track_condition="Good 4", races=races,
        ))
    return meetings
