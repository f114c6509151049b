"""Resource for the TAB affiliates racing API: typed results, short in-client retries, one record per request."""

from __future__ import annotations

import datetime as dt
import email.utils
import json
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Literal

import dagster as dg
import httpx
from pydantic import PrivateAttr

from racing_orchestration.tab.models import (
    Event,
    Meeting,
    TabPayloadError,
    parse_event_response,
    parse_meetings_response,
)

DEFAULT_BASE_URL = "https://api.tab.co.nz/affiliates/v1/racing"
DEFAULT_USER_AGENT = f"racing-orchestration/0.1 python-httpx/{httpx.__version__}"
MAX_PAGES = 50  # 50 x 100 meetings is far above any real day; stops a server that ignores `offset`.


class TabApiError(RuntimeError):
    """A non-transient HTTP error (4xx such as 404): retrying will not help."""

    def __init__(self, message: str, status_code: int | None = None) -> None:
        super().__init__(message)
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
            batch = self._get("/meetings", "/meetings", params, parse_meetings_response)
            fresh = [m for m in batch if m.meeting_id not in meetings]
            meetings.update((m.meeting_id, m) for m in fresh)
            if len(batch) < self.page_limit or not fresh:
                return list(meetings.values())
        raise TabPayloadError("/meetings", f"still more pages after {MAX_PAGES} pages of {self.page_limit}")

    def get_meeting(self, meeting_id: str) -> Meeting:
        meetings = self._get(f"/meetings/{meeting_id}", "/meetings/{id}", {}, parse_meetings_response)
        if len(meetings) != 1:
            raise TabPayloadError("/meetings/{id}", f"expected 1 meeting for {meeting_id}, got {len(meetings)}")
        return meetings[0]

    def get_event(self, race_id: str) -> Event:
        """One race with its runners, odds, results and dividends."""
        return self._get(f"/events/{race_id}", "/events/{id}", {}, parse_event_response)

    def _get(self, path: str, endpoint: str, params: dict[str, Any], parse: Any) -> Any:
        started_at = dt.datetime.now(dt.UTC)
        clock = time.monotonic()
        status_code: int | None = None
        attempts = 0

        def record(outcome: Literal["ok", "empty", "error"], items: int = 0, error: str | None = None) -> None:
            duration_ms = (time.monotonic() - clock) * 1000
            self._calls.append(
                ApiCall(endpoint, dict(params), status_code, outcome, duration_ms, attempts, items, error, started_at)
            )

        problem = ""
        problems: list[str] = []  # every transient problem of this call's attempts, kept on its audit row

        def earlier(attempts_before: list[str]) -> str:
            return f"; earlier attempts: {'; '.join(attempts_before)}" if attempts_before else ""
        while attempts < self.max_attempts:
            attempts += 1
            wait = self.retry_backoff_seconds * 2 ** (attempts - 1)
            try:
                response = self._client().get(path, params=params)
            except httpx.TimeoutException as exc:
                status_code, problem = None, f"timeout after {self.timeout_seconds}s ({type(exc).__name__})"
            except httpx.TransportError as exc:
                status_code, problem = None, f"connection error ({type(exc).__name__}: {exc})"
            else:
                status_code = response.status_code
                if status_code == 429 or status_code >= 500:
                    problem = f"HTTP {status_code}"
                    if status_code == 429:
                        hinted = retry_after_seconds(response.headers.get("Retry-After"), self.retry_after_cap_seconds)
                        wait = wait if hinted is None else hinted
                elif status_code >= 400:
                    error = f"TAB {endpoint} {path}: HTTP {status_code} {_error_text(response)}".strip()
                    record("error", error=error + earlier(problems))
                    raise TabApiError(error, status_code)
                else:
                    try:
                        result = parse(_json(response, endpoint), endpoint)
                    except TabPayloadError as exc:
                        record("error", error=str(exc) + earlier(problems))
                        raise
                    items = len(result) if isinstance(result, list) else 1
                    note = f"recovered after {'; '.join(problems)}" if problems else None
                    record("ok" if items else "empty", items=items, error=note)
                    return result
            problems.append(problem)
            if attempts < self.max_attempts:
                self._sleep(wait)
        error = f"TAB {endpoint} {path}: {problem} (gave up after {attempts} attempts)"
        record("error", error=error + earlier(problems[:-1]))
        raise TabTransientError(error, status_code)


def _json(response: httpx.Response, endpoint: str) -> Any:
    try:
        return response.json()
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise TabPayloadError(endpoint, f"body is not valid JSON ({exc}); starts {response.text[:80]!r}") from exc


def _error_text(response: httpx.Response) -> str:
    # The API's error envelope is {header: {error, error_code, ...}}; fall back to the raw body.
    try:
        header = response.json().get("header") or {}
        return str(header.get("error") or "")
    except (ValueError, AttributeError):
        return response.text[:120]
