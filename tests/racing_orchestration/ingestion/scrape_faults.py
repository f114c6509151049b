"""The real morning_scrape / card_refresh jobs against the simulated feed with per-combination faults, reconstructable
for `execute_job` (which runs them with the threadpool executor, unlike `execute_in_process`).

`execute_job` rebuilds the job from this module in the test's own process (once: Dagster caches it), so the feed's
address, the database, the faults and the record of requests live in module state set by each test (`FEED.configure`)
and read when a run starts.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass, field

import dagster as dg
import httpx

from racing_orchestration.race_db.resource import RaceDatabase
from racing_orchestration.tab.client import TabClient

NO_RACING_COUNTRY = "HK"  # the simulated feed has no racing there on any day: a real empty answer


@dataclass(frozen=True)
class Request:
    at: float  # the fake clock's time when the request was made
    category: str
    country: str
    day: str


@dataclass
class FeedFaults:
    """Which combinations fail (503) or come back empty, and every /meetings request seen, on a test clock."""

    base_url: str = ""
    database_url: str = ""
    failing: set[tuple[str, str]] = field(default_factory=set)  # (category, country): 503 on every day
    # (category, country, day) -> how many of its first requests come back empty (None: all of them)
    empty: dict[tuple[str, str, str], int | None] = field(default_factory=dict)
    clock: Callable[[], float] = lambda: 0.0
    requests: list[Request] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def configure(self, **values) -> None:
        self.__init__(**values)  # type: ignore[misc]

    def attempts(self, category: str, country: str, day: str) -> list[float]:
        return [r.at for r in self.requests if (r.category, r.country, r.day) == (category, country, day)]


FEED = FeedFaults()


class FaultTransport(httpx.BaseTransport):
    """Real HTTP to the simulated feed; a 503, or the question asked for a country without racing, where configured."""

    def __init__(self) -> None:
        self.inner = httpx.HTTPTransport()

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        params = request.url.params
        category, country, day = params.get("category", ""), params.get("country", ""), params.get("date_from", "")[:10]
        if request.url.path.endswith("/meetings"):
            with FEED.lock:
                FEED.requests.append(Request(FEED.clock(), category, country, day))
                seen = len(FEED.attempts(category, country, day))
            if (category, country) in FEED.failing:
                return httpx.Response(503, json={"header": {"error": "unavailable"}}, request=request)
            key = (category, country, day)
            if key in FEED.empty and (FEED.empty[key] is None or seen <= FEED.empty[key]):
                request = httpx.Request(request.method, request.url.copy_set_param("country", NO_RACING_COUNTRY),
                                        headers=request.headers)
        return self.inner.handle_request(request)


class FaultyTabClient(TabClient):
    def model_post_init(self, context) -> None:
        super().model_post_init(context)
        self._transport = FaultTransport()


@dg.resource
def _tab_client_from_feed(_context):
    # One attempt per call: the job's own retries are under test, not the client's.
    return FaultyTabClient(base_url=FEED.base_url, max_attempts=1)


@dg.resource
def _race_db_from_feed(_context):
    db = RaceDatabase(url=FEED.database_url)
    yield db
    db.dispose()


def _resources() -> dict:
    # Built when each run starts, not when the job is defined: Dagster caches the reconstructed job for the process,
    # and every test has its own feed and database.
    return {"tab_client": _tab_client_from_feed, "race_db": _race_db_from_feed}


def morning_scrape_with_faults() -> dg.JobDefinition:
    from racing_orchestration.ingestion.jobs import morning_scrape

    return dg.Definitions(jobs=[morning_scrape], resources=_resources()).resolve_job_def("morning_scrape")


def card_refresh_with_faults() -> dg.JobDefinition:
    from racing_orchestration.ingestion.card_refresh import card_refresh

    return dg.Definitions(jobs=[card_refresh], resources=_resources()).resolve_job_def("card_refresh")
