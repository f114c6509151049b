"""TabClient against the simulated feed over real HTTP: paging, headers, retries, faults and the call record."""

from __future__ import annotations

import datetime as dt
import socket
import threading
import time
from collections.abc import Iterator

import dagster as dg
import httpx
import pytest

from racing_orchestration.tab.client import TabApiError, TabClient, TabTransientError, retry_after_seconds
from racing_orchestration.tab.models import TabPayloadError
from racing_orchestration.tab.sim_day import NZ_TZ
from racing_orchestration.tab.sim_feed import SimFeedConfig, SimFeedServer


# A pinned racing clock (mid-afternoon in Auckland): the client tests must not depend on the wall clock, e.g. the
# racing day rolling over at Auckland midnight between two requests of one test.
PINNED_NOW = dt.datetime(2026, 11, 29, 1, 0, tzinfo=dt.UTC)


@pytest.fixture(scope="module")
def server() -> Iterator[SimFeedServer]:
    config = SimFeedConfig(seed=2, retry_after_seconds=1, timeout_fault_seconds=2.0)
    with SimFeedServer(config, now=lambda: PINNED_NOW) as running:
        yield running


@pytest.fixture
def feed_server(server: SimFeedServer) -> SimFeedServer:
    server.feed.clear_faults()
    server.feed.reset_stats()
    return server


def make_client(server: SimFeedServer, **overrides: object) -> TabClient:
    # A generous timeout: an answer the feed is slow to give on a loaded machine (the suite runs side by side) must not
    # become a retry the test did not ask for. The timeout-fault tests set their own, below the feed's 2 s hold.
    fields = {"base_url": server.base_url, "from_email": "ops@example.org", "partner_name": "Racing Orchestration",
              "partner_id": "partner-42", "timeout_seconds": 10, "retry_backoff_seconds": 0.01}
    return TabClient(**{**fields, **overrides})


class RecordedSleep:
    """Stands in for time.sleep between attempts: records each wait and how many requests the feed had seen then."""

    def __init__(self, server: SimFeedServer) -> None:
        self.server = server
        self.waits: list[tuple[float, int]] = []

    def __call__(self, seconds: float) -> None:
        self.waits.append((seconds, self.server.stats()["total"]))


def today(server: SimFeedServer) -> dt.date:
    return server.feed.now().astimezone(NZ_TZ).date()


@pytest.mark.api
def test_list_meetings_pages_until_exhausted(feed_server: SimFeedServer) -> None:
    day = today(feed_server)
    whole = make_client(feed_server).list_meetings(day, "G", "AUS")
    client = make_client(feed_server, page_limit=2)
    paged = client.list_meetings(day, "G", "AUS")
    assert [m.meeting_id for m in paged] == [m.meeting_id for m in whole] and len(whole) >= 3
    offsets = [call.params["offset"] for call in client.calls]
    assert offsets == list(range(0, 2 * (len(whole) // 2 + 1), 2))  # the last page is short (or empty)
    assert all(c.params["date_from"] == c.params["date_to"] == day.isoformat() for c in client.calls)
    assert all(c.params["category"] == "G" and c.params["country"] == "AUS" for c in client.calls)
    assert feed_server.stats()["requests"]["/meetings"] == 1 + len(client.calls)
    assert all(m.category == "G" and m.country == "AUS" and m.date == day for m in paged)


@pytest.mark.api
def test_headers_identify_the_partner(feed_server: SimFeedServer) -> None:
    client = make_client(feed_server, user_agent="racing-orchestration/0.1 (ops@example.org)")
    client.list_meetings(today(feed_server), "T", "NZ")
    headers = {k.lower(): v for k, v in feed_server.stats()["last_headers"].items()}
    assert headers["from"] == "ops@example.org"
    assert headers["x-partner"] == "Racing Orchestration"
    assert headers["x-partner-id"] == "partner-42"
    assert headers["user-agent"] == "racing-orchestration/0.1 (ops@example.org)"


@pytest.mark.api
def test_connections_are_reused_and_forks_keep_their_own_calls(feed_server: SimFeedServer) -> None:
    client = make_client(feed_server)
    for category in "THG":
        client.list_meetings(today(feed_server), category, "AUS")
    assert feed_server.stats()["connections"] == 1 and feed_server.stats()["total"] == 3
    fork = client.fork()
    assert fork.model_dump() == client.model_dump() and fork.calls == []
    fork.list_meetings(today(feed_server), "T", "NZ")
    assert len(fork.calls) == 1 and len(client.calls) == 3
    fork.close()  # a step's fork ends; the run's pool stays open for the others
    grandchild = fork.fork()
    grandchild.list_meetings(today(feed_server), "G", "NZ")
    assert len(grandchild.calls) == 1 and len(fork.calls) == 1
    # forks reuse the parent's connection: still one connection after five requests
    assert feed_server.stats()["connections"] == 1 and feed_server.stats()["total"] == 5
    client.close()


@pytest.mark.api
def test_event_meeting_and_empty_combination(feed_server: SimFeedServer) -> None:
    client = make_client(feed_server)
    meeting = client.list_meetings(today(feed_server), "H", "NZ")[0]
    assert client.get_meeting(meeting.meeting_id) == meeting
    event = client.get_event(meeting.races[0].race_id)
    assert event.race.event_id == meeting.races[0].race_id and event.race.meeting_id == meeting.meeting_id
    assert event.runners and event.race.category == "H"
    assert client.list_meetings(today(feed_server), "H", "UK") == []
    assert [c.outcome for c in client.calls] == ["ok", "ok", "ok", "empty"]
    assert [c.endpoint for c in client.calls] == ["/meetings", "/meetings/{id}", "/events/{id}", "/meetings"]
    assert client.calls[0].items >= 1 and client.calls[3].items == 0


@pytest.mark.api
def test_transient_faults_are_retried_and_succeed(feed_server: SimFeedServer) -> None:
    feed_server.feed.queue_faults("5xx", "timeout")
    client = make_client(feed_server, timeout_seconds=1.5)  # gives up on the held request (2 s) before the feed does
    meetings = client.list_meetings(today(feed_server), "T", "AUS")
    assert meetings
    (call,) = client.calls
    assert (call.outcome, call.attempts, call.status_code) == ("ok", 3, 200)
    assert feed_server.stats()["faults"] == {"5xx": 1, "timeout": 1}


@pytest.mark.api
def test_persistent_faults_raise_transient_error(feed_server: SimFeedServer) -> None:
    feed_server.feed.queue_faults("5xx", "5xx", "5xx")
    client = make_client(feed_server)
    with pytest.raises(TabTransientError, match=r"TAB /meetings /meetings: HTTP 503 \(gave up after 3 attempts\)"):
        client.list_meetings(today(feed_server), "T", "NZ")
    (call,) = client.calls
    assert (call.outcome, call.attempts, call.status_code) == ("error", 3, 503)
    assert "HTTP 503" in call.error


@pytest.mark.api
def test_timeouts_exhausted_raise_transient_error(feed_server: SimFeedServer) -> None:
    feed_server.feed.queue_faults("timeout", "timeout")
    client = make_client(feed_server, timeout_seconds=0.3, max_attempts=2)
    # The client gave up on its own timeout: had it waited for the server, which holds the request 2 s and then drops
    # the connection, it would report a connection error.
    with pytest.raises(TabTransientError, match="timeout after 0.3s"):
        client.get_event("whatever")
    assert client.calls[0].status_code is None and client.calls[0].attempts == 2
    assert feed_server.stats()["faults"] == {"timeout": 2}


@pytest.mark.api
def test_malformed_payload_is_reported_not_retried(feed_server: SimFeedServer) -> None:
    feed_server.feed.queue_faults("malformed")
    client = make_client(feed_server)
    with pytest.raises(TabPayloadError, match=r"^TAB /meetings response: body is not valid JSON") as raised:
        client.list_meetings(today(feed_server), "T", "NZ")
    assert raised.value.endpoint == "/meetings"
    assert client.calls[0].attempts == 1 and client.calls[0].outcome == "error"
    assert feed_server.stats()["total"] == 1


@pytest.mark.api
def test_retry_after_is_honoured(feed_server: SimFeedServer) -> None:
    feed_server.feed.queue_faults("429")
    sleep = RecordedSleep(feed_server)
    client = make_client(feed_server).with_sleep(sleep)
    assert client.list_meetings(today(feed_server), "T", "NZ")
    # One wait, of the second the sim asks for (backoff alone is 10 ms), after the 429 and before the retry.
    assert sleep.waits == [(1.0, 1)]
    assert client.calls[0].attempts == 2 and feed_server.stats()["total"] == 2


@pytest.mark.api
def test_retry_after_is_capped(feed_server: SimFeedServer) -> None:
    feed_server.feed.queue_faults("429", "429", "429")
    sleep = RecordedSleep(feed_server)
    client = make_client(feed_server, retry_after_cap_seconds=0.1).with_sleep(sleep)
    with pytest.raises(TabTransientError, match="HTTP 429"):
        client.list_meetings(today(feed_server), "T", "NZ")
    # The sim asks for one second each time; the client waits the cap, between attempts only.
    assert sleep.waits == [(0.1, 1), (0.1, 2)]
    assert client.calls[0].attempts == 3


@pytest.mark.api
def test_not_found_is_not_transient(feed_server: SimFeedServer) -> None:
    client = make_client(feed_server, timeout_seconds=10)  # an unknown id makes the sim generate five days first
    expected = r"^TAB /events/\{id\} /events/no-such-race: HTTP 404 events/no-such-race not found$"
    with pytest.raises(TabApiError, match=expected) as raised:
        client.get_event("no-such-race")
    assert not isinstance(raised.value, TabTransientError) and raised.value.status_code == 404
    assert client.calls[0].attempts == 1 and feed_server.stats()["total"] == 1, feed_server.stats()


@pytest.mark.api
def test_connection_refused_is_transient() -> None:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    client = TabClient(base_url=f"http://127.0.0.1:{port}/affiliates/v1/racing", retry_backoff_seconds=0.01)
    with pytest.raises(TabTransientError, match="connection error"):
        client.get_event("x")
    assert client.calls[0].attempts == 3


@pytest.mark.api
def test_resource_in_a_dagster_asset(feed_server: SimFeedServer) -> None:
    day = today(feed_server)

    @dg.asset
    def nz_meetings(tab: TabClient) -> int:
        meetings = tab.list_meetings(day, "T", "NZ")
        assert [c.endpoint for c in tab.calls] == ["/meetings"]
        return len(meetings)

    result = dg.materialize([nz_meetings], resources={"tab": make_client(feed_server)})
    assert result.success and result.output_for_node("nz_meetings") >= 1


@pytest.mark.unit
@pytest.mark.parametrize(
    ("header", "cap", "expected"),
    [
        (None, 10.0, None),
        ("2", 10.0, 2.0),
        ("120", 10.0, 10.0),  # capped
        ("-5", 10.0, 0.0),
        ("soon", 10.0, None),
        ("Wed, 21 Oct 2015 07:28:00 GMT", 10.0, 0.0),  # a date in the past: no wait
    ],
)
def test_retry_after_seconds(header: str | None, cap: float, expected: float | None) -> None:
    assert retry_after_seconds(header, cap) == expected


@pytest.mark.api
@pytest.mark.parametrize(
    ("faults", "outcome", "error"),
    [
        ((), "ok", None),
        (("5xx", "429"), "ok", "recovered after HTTP 503; HTTP 429"),
        (("5xx", "malformed"), "error", "; earlier attempts: HTTP 503"),
        (("429", "5xx", "5xx"), "error", "HTTP 503 (gave up after 3 attempts); earlier attempts: HTTP 429; HTTP 503"),
    ],
)
def test_the_call_record_keeps_every_attempts_problem(feed_server: SimFeedServer, faults, outcome, error) -> None:
    """The `scrapes` audit row of a call shows each fault it met, also the ones a later attempt recovered from."""
    feed_server.feed.queue_faults(*faults)
    client = make_client(feed_server, retry_after_cap_seconds=0.01)
    try:
        client.list_meetings(today(feed_server), "T", "NZ")
    except (TabTransientError, TabPayloadError):
        pass
    (call,) = client.calls
    assert call.outcome == outcome
    if error is None:
        assert call.error is None
    else:
        assert call.error.endswith(error), call.error


def _serving_threads() -> list[threading.Thread]:
    return [thread for thread in threading.enumerate() if thread.name == "sim-tab-feed"]


@pytest.mark.parametrize("enter", ["start then with", "start twice"])
def test_a_feed_started_twice_stops_whole_and_leaves_nothing_serving(enter: str) -> None:
    """`with SimFeedServer(...).start() as server:` is how tests and benchmarks hold a feed. A second start must not
    add a second serving thread: stop() ended one and closed the socket under the other, which then spun on the
    closed socket at a full core for the rest of the process (each such test slowed its whole pytest worker)."""
    before = len(_serving_threads())
    server = SimFeedServer(SimFeedConfig(seed=7)).start()
    if enter == "start then with":
        with server:
            assert httpx.get(server.base_url + "/meetings?limit=1", timeout=5).status_code == 200
    else:
        server.start()
        server.stop()
    deadline = time.monotonic() + 5
    while len(_serving_threads()) > before and time.monotonic() < deadline:
        time.sleep(0.05)
    # The thread itself is what spun: the process's CPU would also count whatever else the worker runs.
    assert len(_serving_threads()) == before, "a serving thread outlived stop()"


def test_an_events_request_is_in_flight_while_the_feed_holds_it_and_not_after() -> None:
    """`events_in_flight` names the race of an /events/{id} request from its arrival until its answer: the live
    production test kills a checkpoint run's container while its race is listed, i.e. mid-request."""
    with SimFeedServer(SimFeedConfig(seed=2, events_latency_ms=1500), now=lambda: PINNED_NOW) as running:
        race_id = running.feed.day(today(running))[0].races[0].race_id
        answered: list[int] = []
        request = threading.Thread(target=lambda: answered.append(
            httpx.get(f"{running.base_url}/events/{race_id}", timeout=30).status_code))
        assert httpx.get(f"{running.root_url}/_sim/stats", timeout=30).json()["events_in_flight"] == {}
        request.start()
        deadline = time.monotonic() + 1.5
        seen: dict[str, int] = {}
        while not seen and time.monotonic() < deadline:
            seen = httpx.get(f"{running.root_url}/_sim/stats", timeout=30).json()["events_in_flight"]
        request.join(30)
        assert seen == {race_id: 1} and answered == [200]
        assert httpx.get(f"{running.root_url}/_sim/stats", timeout=30).json()["events_in_flight"] == {}
