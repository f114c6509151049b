"""The simulated feed's engine: routing, moving clock, racing days, deterministic faults and request counts."""

from __future__ import annotations

import datetime as dt
import json
import random
import threading
from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field
from typing import Any
from urllib.parse import parse_qs, urlsplit

from racing_orchestration.tab.sim_day import NZ_TZ, SimMeeting, SimRace, generate_day, generate_dense
from racing_orchestration.tab.sim_payloads import Lifecycle, envelope, error_envelope, event_data, meeting_json

API_PREFIX = "/affiliates/v1/racing"
FAULT_KINDS = ("5xx", "timeout", "malformed", "429")
MAX_CACHED_DAYS = 14  # ~1 MB a day; a backfill over months must not grow the sim without bound


@dataclass
class SimFeedConfig:
    seed: int = 1
    clock_offset_seconds: float = 0.0
    speed: float = 1.0  # simulated seconds per real second
    dense_every_minutes: float | None = None  # dense mode: only a race every N minutes from now
    dense_races: int = 40
    dense_lead_minutes: float | None = None  # first dense race this long after start (default: one interval)
    interim_after_seconds: float = 120.0
    final_after_seconds: float = 480.0
    error_5xx_rate: float = 0.0
    timeout_rate: float = 0.0
    malformed_rate: float = 0.0
    rate_limit_rate: float = 0.0
    retry_after_seconds: int = 1
    timeout_fault_seconds: float = 30.0  # a "timeout" holds the request this long, then drops the connection
    latency_ms: float = 0.0
    # Added to /events/{id} requests only (odds and results): keeps a checkpoint run mid-request for this long, so a
    # test can kill its worker there without slowing the morning scrape.
    events_latency_ms: float = 0.0
    # How many days back /meetings still serves (None: every day). An older date_from answers 404, as a feed that
    # has dropped its history would: the seam for backfills of days TAB no longer serves.
    history_days: int | None = None


@dataclass
class SimResponse:
    status: int
    body: bytes = b""
    headers: dict[str, str] = field(default_factory=dict)
    hold_seconds: float = 0.0  # wait before answering
    drop: bool = False  # close the connection without an answer
    event_id: str | None = None  # the race of an /events/{id} answer: counted in `events_in_flight` while held


def _json_response(status: int, payload: Any, **headers: str) -> SimResponse:
    return SimResponse(status, json.dumps(payload).encode(), {"Content-Type": "application/json", **headers})


class SimFeed:
    """Routing, clock, racing days, fault draws and request counts; `SimFeedServer` puts it on a socket."""

    def __init__(self, config: SimFeedConfig, now: Callable[[], dt.datetime] | None = None) -> None:
        self.config = config
        self._real_now = now or (lambda: dt.datetime.now(dt.UTC))
        self._anchor = self._real_now()
        self._lock = threading.Lock()
        self._days: dict[dt.date, list[SimMeeting]] = {}
        self._meetings: dict[str, SimMeeting] = {}
        self._races: dict[str, tuple[SimMeeting, SimRace]] = {}
        self._fault_counters: Counter[str] = Counter()  # requests per target, for the fault draws
        self._fault_queue: list[str] = []
        self._counts: Counter[str] = Counter()
        self.last_headers: dict[str, str] = {}
        self._peers: set[str] = set()  # client (host, port)s seen: how many connections clients opened
        self._in_flight: Counter[str] = Counter()  # /events/{id} answers being held, per race id
        self.lifecycle = Lifecycle(dt.timedelta(seconds=config.interim_after_seconds),
                                   dt.timedelta(seconds=config.final_after_seconds))
        self._dense: list[SimMeeting] | None = None
        if config.dense_every_minutes:
            every = dt.timedelta(minutes=config.dense_every_minutes)
            lead = dt.timedelta(minutes=config.dense_lead_minutes) if config.dense_lead_minutes is not None else every
            first = (self.now() + lead).replace(microsecond=0)
            self._dense = generate_dense(config.seed, first, every, config.dense_races)
            self._index(self._dense)

    def now(self) -> dt.datetime:
        """Simulated time: the real clock shifted by the offset and scaled by the speed since start."""
        elapsed = (self._real_now() - self._anchor) * self.config.speed
        return self._anchor + dt.timedelta(seconds=self.config.clock_offset_seconds) + elapsed

    def _index(self, meetings: list[SimMeeting]) -> None:
        for meeting in meetings:
            self._meetings[meeting.meeting_id] = meeting
            self._races.update((race.race_id, (meeting, race)) for race in meeting.races)

    def day(self, date: dt.date) -> list[SimMeeting]:
        """Meetings whose local date is `date` (in dense mode, only the dense meetings of that date)."""
        if self._dense is not None:
            return [m for m in self._dense if m.date == date]
        with self._lock:
            if date not in self._days:
                self._days[date] = generate_day(self.config.seed, date)
                self._index(self._days[date])
                while len(self._days) > MAX_CACHED_DAYS:
                    self._forget(self._days.pop(next(iter(self._days))))
            return self._days[date]

    def _forget(self, meetings: list[SimMeeting]) -> None:
        # Evicted days regenerate identically (same seed and date) if asked for again.
        for meeting in meetings:
            self._meetings.pop(meeting.meeting_id, None)
            for race in meeting.races:
                self._races.pop(race.race_id, None)

    def find_race(self, race_id: str) -> tuple[SimMeeting, SimRace] | None:
        self._warm_window(lambda: race_id in self._races)
        return self._races.get(race_id)

    def find_meeting(self, meeting_id: str) -> SimMeeting | None:
        self._warm_window(lambda: meeting_id in self._meetings)
        return self._meetings.get(meeting_id)

    def _warm_window(self, found: Callable[[], bool]) -> None:
        # Ids carry no date, so generate the days around the simulated today until the id is known.
        today = self.now().astimezone(NZ_TZ).date()
        for delta in (0, 1, -1, 2, -2):
            if found() or self._dense is not None:
                return
            self.day(today + dt.timedelta(days=delta))

    # --- faults and stats ---------------------------------------------------------------------------------
    def queue_faults(self, *kinds: str) -> None:
        """Serve these faults on the next API requests, in order, before any random draws (tests)."""
        unknown = set(kinds) - set(FAULT_KINDS)
        if unknown:
            raise ValueError(f"unknown fault kinds {sorted(unknown)}; choose from {FAULT_KINDS}")
        with self._lock:
            self._fault_queue.extend(kinds)

    def draw_fault(self, target: str = "") -> str | None:
        """The fault for the next request of `target`: queued ones first, then a draw from an RNG seeded with the
        seed, the target and how many times it was requested before. Concurrent clients (the morning scrape's
        threads) then meet the same faults on every run whatever order their requests arrive in."""
        with self._lock:
            if self._fault_queue:
                return self._fault_queue.pop(0)
            self._fault_counters[target] += 1
            roll = random.Random(f"{self.config.seed}:fault:{target}:{self._fault_counters[target]}").random()
        c = self.config
        rates = (c.error_5xx_rate, c.timeout_rate, c.malformed_rate, c.rate_limit_rate)
        for kind, rate in zip(FAULT_KINDS, rates, strict=True):
            if roll < rate:
                return kind
            roll -= rate
        return None

    def count(self, key: str) -> None:
        with self._lock:
            self._counts[key] += 1

    def stats(self) -> dict[str, Any]:
        with self._lock:
            counts = dict(self._counts)
        api = {k: v for k, v in counts.items() if not k.startswith(("fault:", "status:", "event_ok:"))}
        return {
            "requests": api, "total": sum(api.values()),
            "faults": {k.removeprefix("fault:"): v for k, v in counts.items() if k.startswith("fault:")},
            "statuses": {k.removeprefix("status:"): v for k, v in counts.items() if k.startswith("status:")},
            # 200 answers of /events/{id} per race id: how many times each race's odds or results were served.
            "events_served": {k.removeprefix("event_ok:"): v for k, v in counts.items() if k.startswith("event_ok:")},
            # /events/{id} requests received and not yet answered, per race id: a run is mid-request right now.
            "events_in_flight": self.events_in_flight(),
            "connections": len(self._peers), "sim_now": self.now().isoformat(),
            "last_headers": dict(self.last_headers), "config": asdict(self.config),
        }

    def events_in_flight(self) -> dict[str, int]:
        with self._lock:
            return {race_id: n for race_id, n in self._in_flight.items() if n > 0}

    @contextmanager
    def holding(self, response: SimResponse) -> Iterator[None]:
        """While the server holds `response` before answering: an /events/{id} one counts as in flight."""
        if response.event_id is None:
            yield
            return
        with self._lock:
            self._in_flight[response.event_id] += 1
        try:
            yield
        finally:
            with self._lock:
                self._in_flight[response.event_id] -= 1

    def clear_faults(self) -> None:
        with self._lock:
            self._fault_queue.clear()

    def reset_stats(self) -> None:
        with self._lock:
            self._counts.clear()
            self._peers.clear()

    # --- routing ------------------------------------------------------------------------------------------
    def handle(
        self, method: str, target: str, headers: dict[str, str], body: bytes = b"", peer: str | None = None
    ) -> SimResponse:
        url = urlsplit(target)
        query = {k: v[-1] for k, v in parse_qs(url.query).items()}
        if url.path.startswith("/_sim/"):
            return self._control(method, url.path, query, body)
        path = url.path.rstrip("/")
        if not path.startswith(API_PREFIX):
            return _json_response(404, error_envelope("Not Found", target, self.now(), "no such path", "NOT_FOUND"))
        route = path.removeprefix(API_PREFIX)
        parts = route.strip("/").split("/")
        endpoint = "/" + parts[0] + ("/{id}" if len(parts) == 2 else "")
        self.count(endpoint)
        with self._lock:
            self.last_headers = dict(headers)
            if peer:
                self._peers.add(peer)
        response = self._fault(self.draw_fault(target), target) or self._api(method, parts, query, target)
        response.hold_seconds += self.config.latency_ms / 1000
        if endpoint == "/events/{id}":
            response.hold_seconds += self.config.events_latency_ms / 1000
            response.event_id = parts[1]
        self.count(f"status:{response.status if not response.drop else 'dropped'}")
        if endpoint == "/events/{id}" and response.status == 200 and not response.drop:
            self.count(f"event_ok:{parts[1]}")
        return response

    def _fault(self, kind: str | None, target: str) -> SimResponse | None:
        if kind is None:
            return None
        self.count(f"fault:{kind}")
        if kind == "5xx":
            unavailable = error_envelope("Error", target, self.now(), "service unavailable", "UNAVAILABLE")
            return _json_response(503, unavailable)
        if kind == "429":
            retry = str(self.config.retry_after_seconds)
            return _json_response(429, error_envelope("Error", target, self.now(), "rate limited", "RATE_LIMITED"),
                                  **{"Retry-After": retry})
        if kind == "malformed":
            return SimResponse(200, b'{"header": {"title": "Race Meetings"}, "data": {"meetings": [{"meet', {
                "Content-Type": "application/json"})
        return SimResponse(0, hold_seconds=self.config.timeout_fault_seconds, drop=True)

    def _api(self, method: str, parts: list[str], query: dict[str, str], target: str) -> SimResponse:
        now = self.now()
        if method != "GET":
            return _json_response(405, error_envelope("Error", target, now, "method not allowed", "BAD_METHOD"))
        if parts == ["meetings"]:
            return self._meetings_list(query, target, now)
        if len(parts) == 2 and parts[0] == "meetings":
            meeting = self.find_meeting(parts[1])
            if meeting is not None:
                data = {"meetings": [meeting_json(meeting, now, self.lifecycle)]}
                return _json_response(200, envelope("Race Meeting", target, now, {"enc": "json", "id": parts[1]}, data))
        elif len(parts) == 2 and parts[0] == "events":
            found = self.find_race(parts[1])
            if found is not None:
                data = event_data(*found, now, self.lifecycle)
                params = {"enc": "json", "id": parts[1], "with_money_tracker": False}
                return _json_response(200, envelope(f"Event Details: {parts[1]}", target, now, params, data))
        title = "Not Found"
        return _json_response(404, error_envelope(title, target, now, f"{'/'.join(parts)} not found", "NOT_FOUND"))

    def _meetings_list(self, query: dict[str, str], target: str, now: dt.datetime) -> SimResponse:
        today = now.astimezone(NZ_TZ).date()
        try:
            first = _query_date(query.get("date_from"), today)
            last = _query_date(query.get("date_to"), first)
            limit = min(int(query.get("limit") or 100), 200)
            offset = int(query.get("offset") or 0)
        except ValueError as exc:
            return _json_response(400, error_envelope("Bad Request", target, now, str(exc), "BAD_REQUEST"))
        if self.config.history_days is not None and first < today - dt.timedelta(days=self.config.history_days):
            oldest = today - dt.timedelta(days=self.config.history_days)
            return _json_response(404, error_envelope("Not Found", target, now, f"no meetings before {oldest}: "
                                                      "past days are no longer available", "NOT_FOUND"))
        categories = {c.upper() for c in query.get("category", "").split(",") if c.strip()}
        countries = {c.upper() for c in query.get("country", "").split(",") if c.strip()}
        meetings: list[SimMeeting] = []
        for n in range(min(max((last - first).days + 1, 0), 31)):
            meetings += self.day(first + dt.timedelta(days=n))
        chosen = [m for m in meetings
                  if (not categories or m.category in categories) and (not countries or m.country in countries)]
        chosen.sort(key=lambda m: (m.races[0].scheduled_start, m.name))
        page = chosen[offset:offset + limit]
        params = {"enc": "json", "ids": None, "date_from": f"{first}T00:00:00Z", "date_to": f"{last}T00:00:00Z",
                  "type": query.get("category", " "), "country": query.get("country", " "), "limit": limit,
                  "offset": offset, "futures": False, "meeting_numbers": None}
        data = {"meetings": [meeting_json(m, now, self.lifecycle) for m in page]}
        return _json_response(200, envelope("Race Meetings", target, now, params, data))

    def _control(self, method: str, path: str, query: dict[str, str], body: bytes) -> SimResponse:
        if path == "/_sim/stats":
            stats = self.stats()
            if query.get("reset") in ("1", "true"):
                self.reset_stats()
            return _json_response(200, stats)
        if path == "/_sim/stats/reset" and method == "POST":
            self.reset_stats()
            return _json_response(200, {"reset": True})
        if path == "/_sim/faults" and method == "POST":
            try:
                self.queue_faults(*json.loads(body or b"[]"))
            except (ValueError, TypeError) as exc:
                return _json_response(400, {"error": str(exc)})
            return _json_response(200, {"queued": True})
        return _json_response(404, {"error": f"unknown control path {path}"})


def _query_date(value: str | None, default: dt.date) -> dt.date:
    if not value or value.strip().lower() == "today":
        return default
    try:
        return dt.date.fromisoformat(value.strip()[:10])
    except ValueError:
        raise ValueError(f"invalid date {value!r}: expected YYYY-MM-DD or 'today'") from None
