"""The audit side of the race database: scrapes rows per API call, the checkpoint ledger and market movers."""

from __future__ import annotations

import datetime as dt
import math
import threading
import time

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


def _wait_for_blocked_insert(monitor: sa.Engine, timeout: float = 10.0) -> bool:
    """Whether another backend is waiting on a lock inside an INSERT into the ledger (polled up to `timeout`)."""
    query = sa.text("SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock' "
                    "AND query ILIKE 'INSERT INTO race_checkpoints%' AND pid <> pg_backend_pid()")
    deadline = time.monotonic() + timeout
    with monitor.connect() as conn:
        while time.monotonic() < deadline:
            blocked = conn.execute(query).scalar()
            conn.rollback()  # pg_stat_activity is a snapshot per transaction: a new one each poll
            if blocked:
                return True
            time.sleep(0.02)
    return False


def _claim_race(engine: sa.Engine, race_id: str, due: dt.datetime, *, winner_commits: bool) -> dict[str, object]:
    """Two sensors (threads, each its own connection and transaction) claim the same (race, t15) at once.

    A barrier releases both INSERTs together; whoever inserted first holds its uncommitted row until the other's
    INSERT is seen blocked on it in pg_stat_activity, then commits (or rolls back): the contested path, not a
    sequential one."""
    barrier = threading.Barrier(2)
    results: dict[str, object] = {}

    def sensor(name: str) -> None:
        try:
            with engine.connect() as conn:
                tx = conn.begin()
                barrier.wait(timeout=10)
                won = claim_checkpoint(conn, race_id, "t15", due, note=name)
                results[name] = won
                if won and results.setdefault("winner", name) == name:  # the first to insert (atomic under the GIL)
                    results["saw_blocked"] = _wait_for_blocked_insert(engine)
                    (tx.commit if winner_commits else tx.rollback)()
                else:
                    tx.commit()
        except BaseException as exc:  # surfaced by the assertion below
            results[f"{name}_error"] = exc
            barrier.abort()

    threads = [threading.Thread(target=sensor, args=(name,)) for name in ("sensor-a", "sensor-b")]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=30)
    assert not any(thread.is_alive() for thread in threads)
    assert not [key for key in results if key.endswith("_error")], results
    return results


def test_concurrent_claims_of_one_checkpoint_have_exactly_one_winner(engine: sa.Engine, one_meeting: Meeting) -> None:
    for race in one_meeting.races[:4]:
        due = race.start_time - dt.timedelta(minutes=15)
        results = _claim_race(engine, race.race_id, due, winner_commits=True)
        assert sorted([results["sensor-a"], results["sensor-b"]]) == [False, True]
        assert results["saw_blocked"] is True  # the loser's INSERT really ran while the winner's was uncommitted
        with engine.connect() as conn:
            rows = conn.execute(sa.text("SELECT note FROM race_checkpoints WHERE race_id = :r AND checkpoint = 't15'"),
                                {"r": race.race_id}).scalars().all()
        assert rows == [results["winner"]]


def test_a_rolled_back_claim_leaves_the_checkpoint_to_the_waiting_sensor(engine: sa.Engine, one_meeting: Meeting) -> None:
    """A tick that crashes after its INSERT (transaction rolled back) loses its claim: the other sensor, blocked on it,
    then wins, so the checkpoint is still claimed exactly once."""
    race = one_meeting.races[0]
    results = _claim_race(engine, race.race_id, race.start_time - dt.timedelta(minutes=15), winner_commits=False)
    assert results["sensor-a"] is True and results["sensor-b"] is True  # first won then rolled back; the other won
    assert results["saw_blocked"] is True
    with engine.connect() as conn:
        rows = conn.execute(sa.text("SELECT note FROM race_checkpoints WHERE race_id = :r AND checkpoint = 't15'"),
                            {"r": race.race_id}).scalars().all()
    assert len(rows) == 1 and rows[0] != results["winner"]
