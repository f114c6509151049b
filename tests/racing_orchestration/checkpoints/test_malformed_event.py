"""A malformed /events payload at job level: the real checkpoint jobs on a real race database and Dagster instance, the
TAB API answering (through an httpx transport) with the real Awapuni R1 sample, corrupted.

A pre-race run retries a malformed payload like any transient fault (60 s then 120 s: Dagster's retry clock is faked),
then fails with the reason in the ledger and the run's tags; a post-race run follows its 5/5/10-minute chain. Either
way nothing partial is written, every call is in the `scrapes` audit, and a later good payload is taken once.
"""

import datetime as dt
import json
from collections.abc import Callable
from pathlib import Path
from typing import ClassVar

import dagster as dg
import httpx
import pytest
import sqlalchemy as sa

from orchestration_core.run_outcome import TAG_OUTCOME
from racing_orchestration.checkpoints.jobs import checkpoint_run_config, post_race_t5, pre_race_t15
from racing_orchestration.race_db.checkpoints import checkpoint_row, claim_checkpoint
from racing_orchestration.race_db.store import upsert_meetings
from racing_orchestration.tab.client import TabClient
from racing_orchestration.tab.models import parse_meetings_response
from tests.racing_orchestration.checkpoint_support import DagsterRetryClock

MEETINGS_SAMPLE = "nz_meetings_list_2025-07-17.json"
EVENT_SAMPLE = "nz_event_final_results_dividends_awapuni_r1_2025-07-17.json"
RACE_ID = "0f57e087-00d9-4c61-9549-835abe2ae2ed"  # Awapuni R1 in both samples: 8 runners, Final, 14 dividends (7 Final, the ones a Final check stores)
WRITTEN_TABLES = ("runners", "odds_snapshots", "results", "dividends")


def _edit(change: Callable[[dict], None]) -> Callable[[bytes], bytes]:
    def corrupt(good: bytes) -> bytes:
        payload = json.loads(good)
        change(payload)
        return json.dumps(payload).encode()
    return corrupt


def _set(path: str, value) -> Callable[[dict], None]:
    def change(payload: dict) -> None:
        *parents, last = path.split(".")
        node = payload
        for key in parents:
            node = node[int(key)] if isinstance(node, list) else node[key]
        node[last] = value
    return change


def _delete(path: str) -> Callable[[dict], None]:
    def change(payload: dict) -> None:
        *parents, last = path.split(".")
        node = payload
        for key in parents:
            node = node[int(key)] if isinstance(node, list) else node[key]
        del node[last]
    return change


# (id, corruption of the good sample's bytes, what the reason must name)
MALFORMED = [
    ("truncated-json", lambda good: good[: len(good) // 2], "not valid JSON"),
    ("html-instead-of-json", lambda good: b"<html><body>502 Bad Gateway</body></html>", "not valid JSON"),
    ("empty-body", lambda good: b"", "not valid JSON"),
    ("data-is-a-list", _edit(_set("data", [])), "data"),
    ("race-missing", _edit(_delete("data.race")), "data.race"),
    ("runners-an-object", _edit(_set("data.runners", {"1": {}})), "runners"),
    ("event-id-missing", _edit(_delete("data.race.event_id")), "event_id"),
    ("start-time-garbage", _edit(_set("data.race.advertised_start", "soon")), "advertised_start"),
    ("runner-number-a-word", _edit(_set("data.runners.0.runner_number", "seven")), "runner_number"),
    # Values Postgres cannot store: refused at the parse boundary like any malformed payload, not by the database.
    ("runner-name-nul", _edit(_set("data.runners.0.name", "Ru\x00ji")), "NUL character"),
    ("jockey-lone-surrogate", _edit(_set("data.runners.1.jockey", "J \ud800")), "lone surrogate"),
    ("runner-number-beyond-int4", _edit(_set("data.runners.0.runner_number", 2**31)), "runner_number"),
    ("distance-beyond-int4", _edit(_set("data.race.distance", 2**40)), "distance"),
    ("result-runner-twice", _edit(_set("data.results.1.runner_number", 2)), "listed more than once"),
    ("dividend-id-blank", _edit(_set("data.dividends.0.id", "")), "dividend id is blank"),
]


class EventTransport(httpx.BaseTransport):
    """The TAB API for /events/{id}: serves the queued bodies in order (HTTP 200), then the good sample."""

    def __init__(self, good: bytes) -> None:
        self.good = good
        self.queue: list[bytes] = []
        self.served: list[str] = []

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        assert request.url.path.endswith(f"/events/{RACE_ID}"), request.url
        body = self.queue.pop(0) if self.queue else self.good
        self.served.append("good" if body is self.good else "malformed")
        return httpx.Response(200, content=body, headers={"Content-Type": "application/json"}, request=request)


@pytest.fixture
def good_event(tab_samples_dir: Path) -> bytes:
    return (tab_samples_dir / EVENT_SAMPLE).read_bytes()


@pytest.fixture
def open_event(good_event: bytes) -> bytes:
    """The sample as TAB serves it before the jump (status Open): a pre-race run stores odds only then."""
    return _edit(_set("data.race.status", "Open"))(good_event)


@pytest.fixture
def sample_race_db(race_db, tab_samples_dir: Path):
    """The race database after the morning scrape of the sample day (meetings and races, no runners or odds)."""
    with race_db.begin() as conn:
        upsert_meetings(conn, parse_meetings_response(json.loads((tab_samples_dir / MEETINGS_SAMPLE).read_text())))
    return race_db


class SampleTabClient(TabClient):
    """The production client on the test's EventTransport (Dagster re-creates resources from their class, so the
    transport comes from the class, not the instance)."""

    transport: ClassVar[EventTransport | None] = None

    def model_post_init(self, context) -> None:
        super().model_post_init(context)
        self._transport = SampleTabClient.transport


def _client(transport: EventTransport) -> TabClient:
    SampleTabClient.transport = transport
    return SampleTabClient(base_url="https://tab.invalid/affiliates/v1/racing", max_attempts=1)


def _counts(race_db) -> dict[str, int]:
    with race_db.connect() as conn:
        return {t: conn.execute(sa.text(f"SELECT count(*) FROM {t} WHERE race_id = :r"), {"r": RACE_ID}).scalar()
                for t in WRITTEN_TABLES}


def _calls(race_db, run_id: str) -> list[tuple]:
    with race_db.connect() as conn:
        return conn.execute(sa.text("SELECT outcome, status_code, error FROM scrapes WHERE run_id = :r ORDER BY id"),
                            {"r": run_id}).all()


def _duplicates(race_db) -> dict[str, int]:
    keys = {"runners": "race_id, runner_number", "odds_snapshots": "race_id, runner_number, checkpoint",
            "results": "race_id, runner_number", "dividends": "race_id, dividend_id"}
    with race_db.connect() as conn:
        return {t: conn.execute(sa.text(f"SELECT count(*) - count(DISTINCT ({k})) FROM {t}")).scalar()
                for t, k in keys.items()}


def _run(job: dg.JobDefinition, checkpoint: str, instance, transport, race_db, attempt: int = 0):
    config = checkpoint_run_config(RACE_ID, checkpoint, "2025-07-17T00:00:00+00:00", attempt)
    tags = {"racing/race_id": RACE_ID}
    if checkpoint == "post":
        tags["racing/attempt"] = str(attempt)
    return job.execute_in_process(run_config=config, instance=instance, tags=tags, raise_on_error=False,
                                  resources={"tab_client": _client(transport), "race_db": race_db})


@pytest.mark.integration
@pytest.mark.parametrize(("corrupt", "reason"), [(c, r) for _, c, r in MALFORMED], ids=[i for i, _, _ in MALFORMED])
def test_pre_race_malformed_payload_fails_with_a_reason_then_a_good_one_is_taken_once(
        pg_instance, sample_race_db, open_event, monkeypatch, corrupt, reason) -> None:
    retry_clock = DagsterRetryClock.install(monkeypatch)
    race_db = sample_race_db
    with race_db.begin() as conn:
        claim_checkpoint(conn, RACE_ID, "t15", dt.datetime.now(dt.UTC))
    transport = EventTransport(open_event)
    bad = corrupt(open_event)
    transport.queue = [bad, bad, bad]
    failed = _run(pre_race_t15, "t15", pg_instance, transport, race_db)

    assert not failed.success
    assert retry_clock.waits == [60, 120]  # a malformed payload is retried like any transient fault
    with race_db.connect() as conn:
        ledger = checkpoint_row(conn, RACE_ID, "t15")
    assert (ledger.state, ledger.run_id) == ("failed", failed.run_id)
    assert "T-15 fetch failed after 3 attempts" in ledger.note and reason in ledger.note, ledger.note
    run = pg_instance.get_run_by_id(failed.run_id)
    assert run.status == dg.DagsterRunStatus.FAILURE
    assert run.tags[TAG_OUTCOME] == "failed" and reason in run.tags["racing/error"]
    assert _counts(race_db) == dict.fromkeys(WRITTEN_TABLES, 0)  # nothing partial
    calls = _calls(race_db, failed.run_id)
    assert [(c.outcome, c.status_code) for c in calls] == [("error", 200)] * 3
    assert all(reason in c.error for c in calls)

    # The checkpoint is requested again (the sensor's re-request) and the feed is good now: taken once.
    again = _run(pre_race_t15, "t15", pg_instance, transport, race_db)
    assert again.success
    assert transport.served == ["malformed"] * 3 + ["good"]
    with race_db.connect() as conn:
        assert checkpoint_row(conn, RACE_ID, "t15").state == "done"
    assert _counts(race_db) == {"runners": 8, "odds_snapshots": 8, "results": 0, "dividends": 0}
    assert [(c.outcome, c.status_code) for c in _calls(race_db, again.run_id)] == [("ok", 200)]
    assert _duplicates(race_db) == dict.fromkeys(("runners", "odds_snapshots", "results", "dividends"), 0)


@pytest.mark.integration
def test_pre_race_malformed_then_good_within_one_run_takes_the_snapshot_once(
        pg_instance, sample_race_db, open_event, monkeypatch) -> None:
    retry_clock = DagsterRetryClock.install(monkeypatch)
    race_db = sample_race_db
    with race_db.begin() as conn:
        claim_checkpoint(conn, RACE_ID, "t15", dt.datetime.now(dt.UTC))
    transport = EventTransport(open_event)
    transport.queue = [MALFORMED[0][1](open_event)]
    result = _run(pre_race_t15, "t15", pg_instance, transport, race_db)
    assert result.success and retry_clock.waits == [60]
    assert [c.outcome for c in _calls(race_db, result.run_id)] == ["error", "ok"]
    assert _counts(race_db)["odds_snapshots"] == 8 and _duplicates(race_db)["odds_snapshots"] == 0


# The post-race path handles every kind the same way (a TabPayloadError); one of each family keeps the suite short.
POST_RACE_KINDS = [m for m in MALFORMED if m[0] in ("truncated-json", "runners-an-object", "event-id-missing",
                                                    "runner-name-nul", "result-runner-twice", "dividend-id-blank")]


@pytest.mark.integration
@pytest.mark.parametrize(("corrupt", "reason"), [(c, r) for _, c, r in POST_RACE_KINDS], ids=[i for i, _, _ in POST_RACE_KINDS])
def test_post_race_malformed_payload_follows_the_chain_then_takes_the_result_once(
        pg_instance, sample_race_db, good_event, corrupt, reason) -> None:
    race_db = sample_race_db
    with race_db.begin() as conn:
        claim_checkpoint(conn, RACE_ID, "post", dt.datetime.now(dt.UTC))
    transport = EventTransport(good_event)
    transport.queue = [corrupt(good_event)]
    first = _run(post_race_t5, "post", pg_instance, transport, race_db, attempt=0)

    # The run itself succeeds: the next check of the chain is due anyway; the reason is in the ledger and tags.
    assert first.success
    with race_db.connect() as conn:
        ledger = checkpoint_row(conn, RACE_ID, "post")
    assert (ledger.state, ledger.attempt, ledger.run_id) == ("waiting_final", 0, first.run_id)
    assert ledger.note.startswith("fetch failed (") and reason in ledger.note and "attempt 1 due" in ledger.note
    run = pg_instance.get_run_by_id(first.run_id)
    assert run.tags[TAG_OUTCOME] == "partial" and reason in run.tags["racing/error"]
    assert run.tags["racing/awaiting_final"] == "true"
    assert _counts(race_db) == dict.fromkeys(WRITTEN_TABLES, 0)
    assert [(c.outcome, c.status_code) for c in _calls(race_db, first.run_id)] == [("error", 200)]

    # Attempt 1 gets the good (Final) payload: results and dividends stored once; a repeat adds nothing.
    second = _run(post_race_t5, "post", pg_instance, transport, race_db, attempt=1)
    assert second.success and second.output_for_node("check_race_result")["outcome"] == "final"
    with race_db.connect() as conn:
        assert checkpoint_row(conn, RACE_ID, "post").state == "done"
    assert _counts(race_db) == {"runners": 8, "odds_snapshots": 0, "results": 8, "dividends": 7}
    _run(post_race_t5, "post", pg_instance, transport, race_db, attempt=1)
    assert _counts(race_db) == {"runners": 8, "odds_snapshots": 0, "results": 8, "dividends": 7}
    assert _duplicates(race_db) == dict.fromkeys(("runners", "odds_snapshots", "results", "dividends"), 0)


@pytest.mark.integration
def test_post_race_malformed_at_the_last_check_fails_with_a_reason(pg_instance, sample_race_db, good_event) -> None:
    race_db = sample_race_db
    with race_db.begin() as conn:
        claim_checkpoint(conn, RACE_ID, "post", dt.datetime.now(dt.UTC))
    transport = EventTransport(good_event)
    transport.queue = [MALFORMED[4][1](good_event)]  # data.race missing
    result = _run(post_race_t5, "post", pg_instance, transport, race_db, attempt=3)
    assert not result.success
    with race_db.connect() as conn:
        ledger = checkpoint_row(conn, RACE_ID, "post")
    assert ledger.state == "failed" and "results fetch failed at attempt 3" in ledger.note and "data.race" in ledger.note
    run = pg_instance.get_run_by_id(result.run_id)
    assert run.tags[TAG_OUTCOME] == "failed" and "data.race" in run.tags["racing/error"]
    assert _counts(race_db) == dict.fromkeys(WRITTEN_TABLES, 0)
    assert [c.outcome for c in _calls(race_db, result.run_id)] == ["error"]
