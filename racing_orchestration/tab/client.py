"""Resource for the TAB affiliates racing API: typed results, short in-client retries, one record per request."""

from __future__ import annotations

import datetime as dt
import email.utils
import json
import threading
import time
import urllib.parse
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, ClassVar, Literal, NamedTuple

import dagster as dg
import httpx
from pydantic import PrivateAttr

from racing_orchestration.tab.models import (
    Event,
    Meeting,
    MeetingsPage,
    TabPayloadError,
    parse_event_response,
    read_meetings,
)
from racing_orchestration.tab.showable import showable

DEFAULT_BASE_URL = "https://api.tab.co.nz/affiliates/v1/racing"
DEFAULT_USER_AGENT = f"racing-orchestration/0.1 python-httpx/{httpx.__version__}"
MAX_PAGES = 50  # 50 x 100 meetings is far above any real day; stops a server that ignores `offset`.


class TabApiError(RuntimeError):
    """A non-transient HTTP error (4xx such as 404): retrying will not help."""

    def __init__(self, message: str, status_code: int | None = None) -> None:
        # Messages quote the response (the API's error text) and the request path: shown escaped, never raw.
        super().__init__(showable(message, 1000))
        self.status_code = status_code


class TabTransientError(TabApiError):
    """5xx, 429, timeout or connection failure that persisted through the client's own retries."""


@dataclass(frozen=True)
class ApiCall:
    """One logical API request (all its attempts), for the `scrapes` audit table."""

    endpoint: str
    params: dict[str, Any]
    status_code: int | None
    outcome: Literal["ok", "empty", "error"]
    duration_ms: float
    attempts: int
    items: int
    # An error call's reason (with its earlier attempts' problems); for an ok call that needed retries, the
    # transient problems it recovered from ("recovered after HTTP 503; HTTP 429"), so the audit shows every fault.
    error: str | None
    started_at: dt.datetime = field(default_factory=lambda: dt.datetime.now(dt.UTC))
    # Meetings or races of an ok response left out because they could not be stored (models.read_meetings), with
    # the reason of each; they are named in `error` too.
    refused: tuple[str, ...] = ()


class _Answer(NamedTuple):
    status_code: int
    headers: httpx.Headers
    body: bytes


class _Deadline(Exception):
    """The attempt passed its deadline while reading the response."""


class _TooLarge(Exception):
    """The response body is over the byte cap (announced, or read so far)."""


def retry_after_seconds(header: str | None, cap: float) -> float | None:
    """Seconds to wait from a Retry-After header (seconds or HTTP date), capped; None if absent or unreadable."""
    if not header:
        return None
    header = header.strip()
    try:
        seconds = float(header)
    except ValueError:
        try:
            when = email.utils.parsedate_to_datetime(header)
        except (TypeError, ValueError):
            return None
        seconds = (when - dt.datetime.now(dt.UTC)).total_seconds()
    return min(max(seconds, 0.0), cap)


class TabClient(dg.ConfigurableResource):
    """Client of the TAB NZ affiliates racing API (or the simulated feed at the same paths)."""

    base_url: str = DEFAULT_BASE_URL
    from_email: str = ""
    partner_name: str = ""
    partner_id: str = ""
    user_agent: str = DEFAULT_USER_AGENT
    timeout_seconds: float = 10.0
    max_attempts: int = 3
    retry_backoff_seconds: float = 0.5
    retry_after_cap_seconds: float = 10.0
    page_limit: int = 100

    # Real answers are under 1 MiB (a whole day's meetings, every country: ~0.9 MiB). 16 MiB leaves room for a much
    # larger day and stays far below a run's memory; a body announced or growing beyond it is refused unread.
    MAX_RESPONSE_BYTES: ClassVar[int] = 16 * 1024 * 1024
    # httpx's timeouts are per socket operation: a server sending a byte now and then holds a request forever. Each
    # attempt therefore has a total deadline of this many times `timeout_seconds` (connect, headers and body).
    ATTEMPT_DEADLINE_FACTOR: ClassVar[float] = 2.0

    _http: httpx.Client | None = PrivateAttr(default=None)
    _transport: httpx.BaseTransport | None = PrivateAttr(default=None)
    _sleep: Callable[[float], None] = PrivateAttr(default=time.sleep)  # between attempts; tests record the waits
    _calls: list[ApiCall] = PrivateAttr(default_factory=list)
    _lock: threading.Lock = PrivateAttr(default_factory=threading.Lock)
    # A fork borrows its parent's connection pool: one pool per run, not one per step. A new httpx.Client builds an
    # SSL context (loading the CA bundle: tens of ms of CPU) and reconnects; per step that was a third of the
    # morning scrape's CPU.
    _pool_owner: TabClient | None = PrivateAttr(default=None)

    @property
    def calls(self) -> list[ApiCall]:
        return self._calls

    def with_transport(self, transport: httpx.BaseTransport | None) -> TabClient:
        """Use this httpx transport (tests); returns self for chaining."""
        self.close()
        self._transport = transport
        return self

    def with_sleep(self, sleep: Callable[[float], None]) -> TabClient:
        """Wait between attempts with `sleep` instead of time.sleep (tests); returns self for chaining."""
        self._sleep = sleep
        return self

    def fork(self) -> TabClient:
        """A client of the same configuration with its own `calls` (one per step), sharing this one's connections."""
        # A copy, not a new resource: constructing a ConfigurableResource validates and infers its config schema
        # (~4 ms of CPU under the GIL), once per step. The copy keeps the validated fields and gets fresh state.
        fork = self.model_copy()
        fork._http = None
        fork._calls = []
        fork._lock = threading.Lock()
        fork._pool_owner = self._pool_owner or self
        return fork

    def headers(self) -> dict[str, str]:
        # The API asks partners to identify themselves so they are not blocked or rate limited.
        headers = {"User-Agent": self.user_agent, "Accept": "application/json"}
        identity = {"From": self.from_email, "X-Partner": self.partner_name, "X-Partner-ID": self.partner_id}
        for name, value in identity.items():
            if value:
                headers[name] = value
        return headers

    def _client(self) -> httpx.Client:
        if self._pool_owner is not None:
            return self._pool_owner._client()
        with self._lock:  # steps may share one resource across threads; create one connection pool only
            if self._http is None:
                self._http = self._new_http_client()
            return self._http

    def _new_http_client(self) -> httpx.Client:
        return httpx.Client(
            base_url=self.base_url.rstrip("/"),
            headers=self.headers(),
            timeout=httpx.Timeout(self.timeout_seconds, connect=min(self.timeout_seconds, 5.0)),
            transport=self._transport,
            limits=httpx.Limits(max_connections=20, max_keepalive_connections=20),
        )

    def close(self) -> None:
        """Close the connections; a fork leaves its parent's pool open for the other steps."""
        with self._lock:
            if self._http is not None:
                self._http.close()
                self._http = None

    def teardown_after_execution(self, context: dg.InitResourceContext) -> None:
        self.close()

    def list_meetings(self, day: dt.date, category: str, country: str) -> list[Meeting]:
        """Every meeting of one (meeting-local date, category, country), paging offset/limit until exhausted."""
        meetings: dict[str, Meeting] = {}
        for page in range(MAX_PAGES):
            params = {
                "date_from": day.isoformat(),
                "date_to": day.isoformat(),
                "category": category,
                "country": country,
                "limit": self.page_limit,
                "offset": page * self.page_limit,
            }
            batch: MeetingsPage = self._get("/meetings", "/meetings", params, read_meetings)
            fresh = [m for m in batch.meetings if m.meeting_id not in meetings]
            meetings.update((m.meeting_id, m) for m in fresh)
            if batch.listed < self.page_limit or not (fresh or batch.refused):
                return list(meetings.values())
        raise TabPayloadError("/meetings", f"still more pages after {MAX_PAGES} pages of {self.page_limit}")

    def get_meeting(self, meeting_id: str) -> Meeting:
        page = self._get(f"/meetings/{_segment(meeting_id)}", "/meetings/{id}", {}, read_meetings)
        if len(page.meetings) != 1 or page.refused:
            raise TabPayloadError("/meetings/{id}", f"expected 1 meeting for {meeting_id}, got {len(page.meetings)}"
                                  + (f" ({page.refused[0]})" if page.refused else ""))
        return page.meetings[0]

    def get_event(self, race_id: str) -> Event:
        """One race with its runners, odds, results and dividends."""
        return self._get(f"/events/{_segment(race_id)}", "/events/{id}", {}, parse_event_response)

    def _fetch(self, path: str, params: dict[str, Any]) -> _Answer:
        """One attempt, ended by its deadline whatever the server does.

        The request runs in a worker thread that streams the body, checking the byte cap and the deadline at every
        chunk; this thread waits for it until the deadline. A server that drips its headers keeps the worker (and its
        connection) until a byte comes later than `timeout_seconds` or the client closes, but never the caller."""
        client = self._client()
        budget = self.timeout_seconds * self.ATTEMPT_DEADLINE_FACTOR
        deadline = time.monotonic() + budget
        given_up = threading.Event()
        box: dict[str, Any] = {}

        def work() -> None:
            try:
                box["answer"] = _read(client, path, params, deadline, given_up, self.MAX_RESPONSE_BYTES)
            except BaseException as exc:  # noqa: BLE001 (handed to the waiting thread)
                box["error"] = exc

        worker = threading.Thread(target=work, name="tab-request", daemon=True)
        worker.start()
        worker.join(max(0.0, deadline - time.monotonic()) + 0.05)
        if worker.is_alive():
            given_up.set()
            raise _Deadline()
        if "error" in box:
            raise box["error"]
        return box["answer"]

    def _get(self, path: str, endpoint: str, params: dict[str, Any], parse: Any) -> Any:
        started_at = dt.datetime.now(dt.UTC)
        clock = time.monotonic()
        status_code: int | None = None
        attempts = 0

        def record(outcome: Literal["ok", "empty", "error"], items: int = 0, error: str | None = None,
                   refused: tuple[str, ...] = ()) -> None:
            duration_ms = (time.monotonic() - clock) * 1000
            # The reason reaches `scrapes.error` and the audit CLI: one showable line.
            shown = showable(error, 2000) if error is not None else None
            self._calls.append(ApiCall(endpoint, dict(params), status_code, outcome, duration_ms, attempts, items,
                                       shown, started_at, refused))

        problem = ""
        problems: list[str] = []  # every transient problem of this call's attempts, kept on its audit row

        def earlier(attempts_before: list[str]) -> str:
            return f"; earlier attempts: {'; '.join(attempts_before)}" if attempts_before else ""
        while attempts < self.max_attempts:
            attempts += 1
            wait = self.retry_backoff_seconds * 2 ** (attempts - 1)
            try:
                response = self._fetch(path, params)
            except _Deadline:
                status_code = None
                problem = (f"no complete answer within {self.timeout_seconds * self.ATTEMPT_DEADLINE_FACTOR:g} s "
                           f"({self.ATTEMPT_DEADLINE_FACTOR:g} x the {self.timeout_seconds:g} s timeout)")
            except (_TooLarge, httpx.DecodingError) as exc:
                # A bad payload, as one that is not JSON: recorded, not retried here.
                if isinstance(exc, _TooLarge):
                    status_code, what = exc.args[0], (f"response body over {self.MAX_RESPONSE_BYTES // 2**20} MiB "
                                                      f"({exc.args[1]}): not read")
                else:
                    status_code, what = None, f"body cannot be decoded ({type(exc).__name__}: {exc})"
                payload_error = TabPayloadError(endpoint, what)
                record("error", error=str(payload_error) + earlier(problems))
                raise payload_error from None
            except httpx.TimeoutException as exc:
                status_code, problem = None, f"timeout after {self.timeout_seconds}s ({type(exc).__name__})"
            except httpx.RequestError as exc:  # connection, protocol and other transport failures
                status_code, problem = None, f"connection error ({type(exc).__name__}: {exc})"
            else:
                status_code = response.status_code
                if status_code == 429 or status_code >= 500:
                    problem = f"HTTP {status_code}"
                    if status_code == 429:
                        hinted = retry_after_seconds(response.headers.get("Retry-After"), self.retry_after_cap_seconds)
                        wait = wait if hinted is None else hinted
                elif status_code >= 400:
                    error = showable(f"TAB {endpoint} {path}: HTTP {status_code} {_error_text(response.body)}".strip())
                    record("error", error=error + earlier(problems))
                    raise TabApiError(error, status_code)
                else:
                    try:
                        result = parse(_json(response.body, endpoint), endpoint)
                    except TabPayloadError as exc:
                        record("error", error=str(exc) + earlier(problems))
                        raise
                    # A /meetings page (its refused meetings and races named), or one event.
                    refused, items = ((result.refused, len(result.meetings)) if isinstance(result, MeetingsPage)
                                      else ((), 1))
                    notes = [f"recovered after {'; '.join(problems)}"] if problems else []
                    if refused:
                        notes.insert(0, f"refused {len(refused)} meeting(s)/race(s) that cannot be stored: "
                                        + "; ".join(refused))
                    record("ok" if items else "empty", items=items, error="; ".join(notes) or None, refused=refused)
                    return result
            problems.append(problem)
            if attempts < self.max_attempts:
                self._sleep(wait)
        error = f"TAB {endpoint} {path}: {problem} (gave up after {attempts} attempts)"
        record("error", error=error + earlier(problems[:-1]))
        raise TabTransientError(error, status_code)


def _segment(value: str) -> str:
    """An id as one path segment: percent-encoded, so no id (from TAB or a command line) changes the path or makes
    an invalid URL."""
    return urllib.parse.quote(value.encode("utf-8", "surrogatepass"), safe="")


def _read(client: httpx.Client, path: str, params: dict[str, Any], deadline: float, given_up: threading.Event,
          cap: int) -> _Answer:
    """GET `path` and read its body, refusing one announced or growing over `cap` bytes and stopping at `deadline`
    (or once the waiting thread has given up)."""
    with client.stream("GET", path, params=params) as response:
        announced = response.headers.get("Content-Length", "")
        if announced.strip().isdigit() and int(announced) > cap:
            raise _TooLarge(response.status_code, f"announced {int(announced)} bytes")
        body = bytearray()
        for chunk in response.iter_bytes():
            body += chunk
            if len(body) > cap:
                raise _TooLarge(response.status_code, f"more than {cap} bytes read")
            if given_up.is_set() or time.monotonic() > deadline:
                raise _Deadline()
        return _Answer(response.status_code, response.headers, bytes(body))


def _json(body: bytes, endpoint: str) -> Any:
    try:
        return json.loads(body)
    except (json.JSONDecodeError, UnicodeDecodeError, RecursionError) as exc:
        start = body[:80].decode("utf-8", "replace")
        raise TabPayloadError(endpoint, f"body is not valid JSON ({exc}); starts {start!r}") from exc


def _error_text(body: bytes) -> str:
    # The API's error envelope is {header: {error, error_code, ...}}; fall back to the raw body. Shown escaped.
    try:
        header = json.loads(body).get("header") or {}
        return showable(header.get("error") or "", 300)
    except (ValueError, AttributeError, RecursionError):
        return showable(body[:120].decode("utf-8", "replace"), 300)
