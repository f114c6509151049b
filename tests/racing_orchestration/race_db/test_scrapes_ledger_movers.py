"""The audit side of the race database: scrapes rows per API call, the checkpoint ledger and market movers."""

from __future__ import annotations

import datetime as dt
import math

import pytest
import sqlalchemy as sa

from racing_orchestration.race_db.checkpoints import (
    checkpoint_row,
    claim_checkpoint,
    claimed_checkpoints,
    update_checkpoint,
)
from racing_orchestration.race_db.movers import market_movers_for_day, upsert_market_movers
from racing_orchestration.race_db.store import record_scrapes, upsert_meetings
from racing_orchestration.tab.client import ApiCall
from racing_orchestration.tab.models import Meeting
from tests.racing_orchestration.race_db.conftest import snapshot

pytestmark = pytest.mark.integration

T0 = dt.datetime(2025, 7, 16, 18, 0, tzinfo=dt.UTC)


def _calls() -> list[ApiCall]:
    return [
        ApiCall("/meetings", {"date_from": dt.date(2025, 7, 17), "category": "T", "country": "NZ", "offset": 0},
                200, "ok", 123.4, 1, 12, None, T0),
        ApiCall("/meetings", {"date_from": "2025-07-17", "category": "G", "country": "AUS"},
                200, "empty", 80.0, 1, 0, None, T0 + dt.timedelta(seconds=1)),
        ApiCall("/events/{id}", {"id": "abc"}, 503, "error", 2100.5, 3, 0, "HTTP 503 after 3 attempts",
                T0 + dt.timedelta(seconds=2)),
    ]  # fmt: skip


def test_record_scrapes_stores_each_call_with_its_run_once(engine: sa.Engine) -> None:
    with engine.begin() as conn:
        assert record_scrapes(conn, _calls(), run_id="run-123") == 3
        assert record_scrapes(conn, _calls(), run_id="run-123") == 0  # a retried step records the same calls
        assert record_scrapes(conn, [], run_id="run-123") == 0
        rows = conn.execute(sa.text("SELECT * FROM scrapes ORDER BY started_at")).mappings().all()
    assert [(r["endpoint"], r["outcome"], r["items"], r["run_id"]) for r in rows] == [
        ("/meetings", "ok", 12, "run-123"),
        ("/meetings", "empty", 0, "run-123"),
        ("/events/{id}", "error", 0, "run-123"),
    ]
    assert rows[0]["params"] == {"date_from": "2025-07-17", "category": "T", "country": "NZ", "offset": 0}
    assert (rows[2]["status_code"], rows[2]["attempts"], rows[2]["error"]) == (503, 3, "HTTP 503 after 3 attempts")
    assert rows[2]["duration_ms"] == 2100.5 and rows[0]["started_at"] == T0


def test_record_scrapes_refuses_naive_times_and_writes_nothing(engine: sa.Engine) -> None:
    naive = ApiCall("/meetings", {}, 200, "ok", 1.0, 1, 0, None, dt.datetime(2025, 7, 17, 6, 0))
    with engine.begin() as conn:
        with pytest.raises(ValueError, match="ApiCall /meetings started_at must be timezone-aware"):
            record_scrapes(conn, [*_calls(), naive], run_id=None)
        assert snapshot(conn, "scrapes") == []


@pytest.fixture
def one_meeting(engine: sa.Engine, sample_meetings: list[Meeting]) -> Meeting:
    meeting = sample_meetings[0]
    with engine.begin() as conn:
        upsert_meetings(conn, [meeting])
    return meeting


def test_checkpoint_ledger_claims_once(engine: sa.Engine, one_meeting: Meeting) -> None:
    first, second = (r.race_id for r in one_meeting.races[:2])
    due = one_meeting.races[0].start_time - dt.timedelta(minutes=60)
    with engine.begin() as conn:
        assert claim_checkpoint(conn, first, "t60", due) is True
        assert claim_checkpoint(conn, first, "t60", due) is False  # a restarted sensor must not request it again
        assert claim_checkpoint(conn, first, "t15", due, note="late by 3 min") is True
        assert claimed_checkpoints(conn, [first, second], "t60") == {first}
        assert claimed_checkpoints(conn, [], "t60") == set()
        assert update_checkpoint(conn, first, "t60", state="launched", run_id="run-9") is True
        assert update_checkpoint(conn, second, "t60", state="launched") is False
        row = checkpoint_row(conn, first, "t60")
        with pytest.raises(ValueError, match="at least one of"):
            update_checkpoint(conn, first, "t60")
    assert (row.state, row.run_id, row.scheduled_for, row.note) == ("launched", "run-9", due, None)
    with engine.begin() as conn, pytest.raises(sa.exc.IntegrityError):
        claim_checkpoint(conn, "no-such-race", "t60", due)  # the ledger only holds known races


def test_market_movers_upsert_is_idempotent_and_ordered(engine: sa.Engine, one_meeting: Meeting) -> None:
    race_id = one_meeting.races[0].race_id
    day = one_meeting.date
    rows = [
        {"race_id": race_id, "runner_number": 1, "meeting_date": day, "win_t60": 5.0, "win_t15": 4.0,
         "finish_position": 1, "move_pct": -20.0},
        {"race_id": race_id, "runner_number": 2, "meeting_date": day, "win_t60": 3.0, "win_t15": 4.5,
         "finish_position": None, "move_pct": 50.0},
        {"race_id": race_id, "runner_number": 3, "meeting_date": day, "win_t60": math.nan, "win_t15": 9.0,
         "finish_position": 2, "move_pct": math.nan},  # pandas NaN: no T-60 price
    ]  # fmt: skip
    with engine.begin() as conn:
        assert upsert_market_movers(conn, rows, T0) == 3
        # Recomputing the same figures later is not a change: computed_at stays as first written.
        assert upsert_market_movers(conn, rows, T0 + dt.timedelta(hours=1)) == 0
        stored = market_movers_for_day(conn, day)
    assert [(r.runner_number, r.move_pct) for r in stored] == [(2, 50.0), (1, -20.0), (3, None)]
    assert {r.computed_at for r in stored} == {T0}
    with engine.begin() as conn, pytest.raises(ValueError, match=r"lack column\(s\) \['move_pct'\]"):
        upsert_market_movers(conn, [{k: v for k, v in rows[0].items() if k != "move_pct"}], T0)
