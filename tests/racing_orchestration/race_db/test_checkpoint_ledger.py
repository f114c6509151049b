"""The checkpoint ledger's rules (racing_orchestration/race_db/checkpoints.py), one behaviour per test, on Postgres:
who may claim a row, which rows a sensor tick picks up again, and what each step leaves in the row for the audit.
These are the statements `make mutation` holds the ledger's SQL to (tools/mutation.py)."""

from __future__ import annotations

import datetime as dt

import pytest
import sqlalchemy as sa

from racing_orchestration.race_db.checkpoints import (
    await_next_attempt,
    checkpoint_row,
    claim_checkpoint,
    claim_due_attempts,
    claimed_checkpoints,
    give_up_checkpoint,
    next_attempt_due,
    reclaim_unlaunched,
    record_relaunch,
    reschedule_checkpoint,
    update_checkpoint,
)
from racing_orchestration.race_db.store import upsert_meetings
from racing_orchestration.tab.models import Meeting

pytestmark = pytest.mark.integration

NOW = dt.datetime(2025, 7, 17, 4, 0, tzinfo=dt.UTC)
MINUTE = dt.timedelta(minutes=1)


@pytest.fixture
def races(engine: sa.Engine, sample_meetings: list[Meeting]) -> list[str]:
    """The race ids of one stored meeting (the ledger only holds known races)."""
    meeting = sample_meetings[0]
    with engine.begin() as conn:
        upsert_meetings(conn, [meeting])
    return [race.race_id for race in meeting.races]


def row(engine: sa.Engine, race_id: str, checkpoint: str = "results") -> sa.Row:
    with engine.connect() as conn:
        found = checkpoint_row(conn, race_id, checkpoint)
    assert found is not None, (race_id, checkpoint)
    return found


def set_row(engine: sa.Engine, race_id: str, checkpoint: str = "results", **values) -> None:
    """A ledger row put into a state directly, as an earlier step (or a crash) left it."""
    assignments = ", ".join(f"{name} = :{name}" for name in values)
    with engine.begin() as conn:
        conn.execute(sa.text(f"UPDATE race_checkpoints SET {assignments} WHERE race_id = :race_id "
                             "AND checkpoint = :checkpoint"), {**values, "race_id": race_id, "checkpoint": checkpoint})


def claim(engine: sa.Engine, race_id: str, checkpoint: str = "results", **kwargs) -> bool:
    kwargs.setdefault("scheduled_for", NOW)
    with engine.begin() as conn:
        return claim_checkpoint(conn, race_id, checkpoint, **kwargs)


# --- claiming ------------------------------------------------------------------------------------------------------
def test_a_claim_stores_what_the_sensor_asked_for(engine, races) -> None:
    assert claim(engine, races[0], "t60", scheduled_for=NOW, note="late by 2 min", requested_at=NOW - MINUTE,
                 run_key="t60:r1:abc") is True
    found = row(engine, races[0], "t60")
    assert (found.state, found.scheduled_for, found.note, found.requested_at, found.run_key, found.run_id,
            found.attempt, found.relaunches) == ("requested", NOW, "late by 2 min", NOW - MINUTE, "t60:r1:abc", None,
                                                 0, 0)


def test_a_claim_without_the_sensors_clock_is_stamped_by_the_database(engine, races) -> None:
    with engine.connect() as conn:
        database_now = conn.execute(sa.select(sa.func.now())).scalar()
    claim(engine, races[0], state="requested_late")
    found = row(engine, races[0])
    assert found.state == "requested_late"
    assert abs(found.requested_at - database_now) < dt.timedelta(seconds=30)


@pytest.mark.parametrize("held_state", ["requested", "running", "waiting_final", "done", "failed", "skipped"])
def test_a_held_row_is_not_claimed_again_and_is_left_as_it_was(engine, races, held_state) -> None:
    claim(engine, races[0], note="first")
    set_row(engine, races[0], state=held_state, run_id="run-1", relaunches=2)
    assert claim(engine, races[0], scheduled_for=NOW + MINUTE, note="second", run_key="k2") is False
    found = row(engine, races[0])
    assert (found.state, found.run_id, found.relaunches, found.note, found.scheduled_for, found.run_key) == (
        held_state, "run-1", 2, "first", NOW, None)


def test_a_rescheduled_row_is_taken_over_once_and_starts_clean(engine, races) -> None:
    claim(engine, races[0], note="first")
    set_row(engine, races[0], state="rescheduled", run_id="run-1", relaunches=3, checked_at=NOW)
    later = NOW + 10 * MINUTE
    assert claim(engine, races[0], scheduled_for=later, note="moved", run_key="k2", requested_at=later) is True
    found = row(engine, races[0])
    assert (found.state, found.scheduled_for, found.note, found.run_key, found.requested_at, found.run_id,
            found.relaunches, found.checked_at) == ("requested", later, "moved", "k2", later, None, 0, None)
    assert claim(engine, races[0], scheduled_for=later, note="again") is False  # taken over: held once more


@pytest.mark.parametrize("naive", ["scheduled_for", "requested_at"])
def test_a_claim_with_a_naive_time_is_refused_and_stores_nothing(engine, races, naive) -> None:
    times = {"scheduled_for": NOW, "requested_at": NOW, naive: NOW.replace(tzinfo=None)}
    with pytest.raises(ValueError, match=f"{naive} must be timezone-aware"):
        claim(engine, races[0], **times)
    with engine.connect() as conn:
        assert checkpoint_row(conn, races[0], "results") is None


def test_claimed_checkpoints_names_only_the_asked_races_of_that_checkpoint(engine, races) -> None:
    claim(engine, races[0], "t60")
    claim(engine, races[1], "t15")
    claim(engine, races[2], "t60")
    with engine.connect() as conn:
        assert claimed_checkpoints(conn, iter([races[0], races[1]]), "t60") == {races[0]}
        assert claimed_checkpoints(conn, races[:3], "t15") == {races[1]}
        assert claimed_checkpoints(conn, [], "t60") == set()


def test_a_locked_row_is_held_until_the_transaction_ends(engine, races) -> None:
    claim(engine, races[0])
    nowait = sa.text("SELECT 1 FROM race_checkpoints WHERE race_id = :r FOR UPDATE NOWAIT")
    with engine.connect() as holder, engine.connect() as other:
        holder.begin()
        assert checkpoint_row(holder, races[0], "results").state == "requested"
        other.begin()
        other.execute(nowait, {"r": races[0]})  # a plain read (the default) holds nothing
        other.rollback()
        holder.rollback()
        holder.begin()
        assert checkpoint_row(holder, races[0], "results", lock=True).state == "requested"
        other.begin()
        with pytest.raises(sa.exc.OperationalError, match="could not obtain lock"):
            other.execute(nowait, {"r": races[0]})
        other.rollback()
        holder.rollback()


# --- what a run does to its row ------------------------------------------------------------------------------------
def test_an_update_changes_only_the_given_fields_of_the_named_row(engine, races) -> None:
    claim(engine, races[0], note="claimed")
    claim(engine, races[0], "t60", note="the other checkpoint")
    with engine.begin() as conn:
        assert update_checkpoint(conn, races[0], "results", state="running") is True
        assert update_checkpoint(conn, races[0], "results", run_id="run-7") is True
        assert update_checkpoint(conn, races[1], "results", state="running") is False  # never claimed
        with pytest.raises(ValueError, match="^update_checkpoint needs at least one of state, run_id, note$"):
            update_checkpoint(conn, races[0], "results")
    found = row(engine, races[0])
    assert (found.state, found.run_id, found.note) == ("running", "run-7", "claimed")
    with engine.begin() as conn:
        assert update_checkpoint(conn, races[0], "results", note="results stored") is True
    assert (row(engine, races[0]).state, row(engine, races[0]).note) == ("running", "results stored")
    other = row(engine, races[0], "t60")
    assert (other.state, other.run_id, other.note) == ("requested", None, "the other checkpoint")


def test_a_run_gives_its_row_back_only_while_it_holds_it(engine, races) -> None:
    claim(engine, races[0])
    set_row(engine, races[0], state="running", run_id="run-1")
    later = NOW + 30 * MINUTE
    with engine.begin() as conn:
        assert reschedule_checkpoint(conn, races[0], "results", run_id="run-2", scheduled_for=later,
                                     note="not mine") is False
        assert reschedule_checkpoint(conn, races[0], "t60", run_id="run-1", scheduled_for=later,
                                     note="other checkpoint") is False
    assert row(engine, races[0]).state == "running"
    with engine.begin() as conn:
        assert reschedule_checkpoint(conn, races[0], "results", run_id="run-1", scheduled_for=later,
                                     note="start moved") is True
    found = row(engine, races[0])
    assert (found.state, found.scheduled_for, found.note) == ("rescheduled", later, "start moved")
    with engine.begin() as conn:  # no longer running: a second give-back changes nothing
        assert reschedule_checkpoint(conn, races[0], "results", run_id="run-1", scheduled_for=NOW,
                                     note="again") is False
        with pytest.raises(ValueError, match="scheduled_for must be timezone-aware"):
            reschedule_checkpoint(conn, races[0], "results", run_id="run-1", scheduled_for=later.replace(tzinfo=None),
                                  note="naive")
    assert row(engine, races[0]).scheduled_for == later


def test_a_give_back_changes_the_named_race_only(engine, races) -> None:
    for race_id in races[:2]:  # the same run id on two rows: only the race named is given back
        claim(engine, race_id)
        set_row(engine, race_id, state="running", run_id="run-1")
    with engine.begin() as conn:
        assert reschedule_checkpoint(conn, races[1], "results", run_id="run-1", scheduled_for=NOW + MINUTE,
                                     note="start moved") is True
    assert (row(engine, races[0]).state, row(engine, races[1]).state) == ("running", "rescheduled")


def test_a_results_attempt_that_saw_no_final_waits_for_the_next(engine, races) -> None:
    claim(engine, races[0])
    claim(engine, races[0], "t60")
    due = NOW + 2 * MINUTE
    with engine.begin() as conn:
        assert await_next_attempt(conn, races[0], "results", attempt=1, next_attempt_at=due, run_id="run-1",
                                  note="Interim") is True
        assert await_next_attempt(conn, races[1], "results", attempt=1, next_attempt_at=due, run_id="run-x") is False
        with pytest.raises(ValueError, match="next_attempt_at must be timezone-aware"):
            await_next_attempt(conn, races[0], "results", attempt=2, next_attempt_at=due.replace(tzinfo=None),
                               run_id="run-2")
    found = row(engine, races[0])
    assert (found.state, found.attempt, found.next_attempt_at, found.run_id, found.note) == (
        "waiting_final", 1, due, "run-1", "Interim")
    assert (row(engine, races[0], "t60").state, row(engine, races[0], "t60").attempt) == ("requested", 0)


# --- the results chain: due attempts ---------------------------------------------------------------------------------
def waiting(engine, race_id: str, *, due: dt.datetime, attempt: int = 1, run_id: str = "run-1",
            checkpoint: str = "results", state: str = "waiting_final") -> None:
    claim(engine, race_id, checkpoint)
    set_row(engine, race_id, checkpoint, state=state, attempt=attempt, next_attempt_at=due, run_id=run_id,
            relaunches=2, run_key="old-key", checked_at=NOW - MINUTE)


def test_a_due_attempt_is_claimed_once_as_the_next_attempt(engine, races) -> None:
    waiting(engine, races[0], due=NOW, attempt=3, run_id="run-3")  # due exactly now: due
    with engine.begin() as conn:
        claimed = claim_due_attempts(conn, "results", NOW)
        again = claim_due_attempts(conn, "results", NOW)
    assert [(r.race_id, r.attempt, r.previous_run_id, r.scheduled_for, r.due_at) for r in claimed] == [
        (races[0], 4, "run-3", NOW, NOW)]
    assert again == []
    found = row(engine, races[0])
    assert (found.state, found.attempt, found.previous_run_id, found.run_id, found.relaunches, found.run_key,
            found.checked_at, found.requested_at, found.next_attempt_at) == (
        "requested", 4, "run-3", None, 0, None, None, NOW, NOW)  # next_attempt_at stays: the attempt's target


def test_only_waiting_rows_of_the_checkpoint_due_by_now_and_ahead_are_claimed(engine, races) -> None:
    waiting(engine, races[0], due=NOW + MINUTE)  # a minute early
    waiting(engine, races[1], due=NOW - MINUTE, checkpoint="t15")  # another checkpoint
    waiting(engine, races[2], due=NOW - MINUTE, state="running")  # not waiting
    with engine.begin() as conn:
        assert claim_due_attempts(conn, "results", NOW) == []
        assert next_attempt_due(conn, "results") == NOW + MINUTE
        assert [r.race_id for r in claim_due_attempts(conn, "results", NOW, ahead=MINUTE)] == [races[0]]
        assert next_attempt_due(conn, "results") is None
        with pytest.raises(ValueError, match="now must be timezone-aware"):
            claim_due_attempts(conn, "results", NOW.replace(tzinfo=None))


def test_due_attempts_come_earliest_first_up_to_the_limit(engine, races) -> None:
    waiting(engine, races[0], due=NOW - MINUTE)
    waiting(engine, races[1], due=NOW - 3 * MINUTE)
    waiting(engine, races[2], due=NOW - MINUTE)
    waiting(engine, races[3], due=NOW - 2 * MINUTE)
    tie = sorted([races[0], races[2]])
    with engine.begin() as conn:
        first = claim_due_attempts(conn, "results", NOW, limit=3)
        rest = claim_due_attempts(conn, "results", NOW, limit=3)
    assert [r.race_id for r in first] == [races[1], races[3], tie[0]]
    assert [r.race_id for r in rest] == [tie[1]]


def test_a_tick_claims_at_most_200_due_attempts_and_the_rest_on_the_next(engine, races) -> None:
    with engine.begin() as conn:
        conn.execute(sa.text(
            "INSERT INTO races (race_id, meeting_id, race_number, name, start_time, status) "
            "SELECT 'bulk-' || lpad(g::text, 3, '0'), meeting_id, 100 + g, name, start_time, status "
            "FROM races, generate_series(1, 201) AS g WHERE race_id = :one"), {"one": races[0]})
        conn.execute(sa.text(
            "INSERT INTO race_checkpoints (race_id, checkpoint, scheduled_for, state, attempt, next_attempt_at, run_id) "
            "SELECT race_id, 'results', :now, 'waiting_final', 1, :now, 'run-' || race_id FROM races "
            "WHERE race_id LIKE 'bulk-%'"), {"now": NOW})
        first = claim_due_attempts(conn, "results", NOW)
        rest = claim_due_attempts(conn, "results", NOW)
    assert (len(first), first[0].race_id, first[-1].race_id) == (200, "bulk-001", "bulk-200")
    assert [r.race_id for r in rest] == ["bulk-201"]


def test_the_earliest_waiting_attempt_is_named_for_the_skip_message(engine, races) -> None:
    waiting(engine, races[0], due=NOW + 5 * MINUTE)
    waiting(engine, races[1], due=NOW + 2 * MINUTE)
    waiting(engine, races[2], due=NOW - MINUTE, checkpoint="t15")
    waiting(engine, races[3], due=NOW - MINUTE, state="done")
    with engine.connect() as conn:
        assert next_attempt_due(conn, "results") == NOW + 2 * MINUTE
        assert next_attempt_due(conn, "t60") is None


# --- rows no run finished ------------------------------------------------------------------------------------------
STALE = 5 * MINUTE


def stuck(engine, race_id: str, *, state: str, run_id: str | None, looked_at: dt.datetime,
          checkpoint: str = "results", checked: bool = False) -> None:
    claim(engine, race_id, checkpoint, requested_at=looked_at if not checked else NOW - 60 * MINUTE)
    set_row(engine, race_id, checkpoint, state=state, run_id=run_id, checked_at=looked_at if checked else None)


@pytest.mark.parametrize(("state", "run_id", "reclaimed"), [
    ("requested", None, True),  # the daemon crashed between claim and launch
    ("requested_late", None, True),
    ("running", "run-1", True),  # its run may have died without recording the end
    ("requested", "run-1", False),  # a run took it
    ("running", None, False),
    ("waiting_final", "run-1", False),
    ("rescheduled", "run-1", False),
    ("done", "run-1", False),
    ("failed", None, False),
])
def test_which_rows_count_as_stuck(engine, races, state, run_id, reclaimed) -> None:
    stuck(engine, races[0], state=state, run_id=run_id, looked_at=NOW - STALE)
    with engine.begin() as conn:
        found = reclaim_unlaunched(conn, "results", NOW, stale_after=STALE)
    assert [r.race_id for r in found] == ([races[0]] if reclaimed else [])


@pytest.mark.parametrize("checked", [False, True], ids=["requested_at", "checked_at"])
def test_a_row_is_stuck_once_not_looked_at_for_stale_after_and_is_looked_at_again_only_after_another(
        engine, races, checked) -> None:
    stuck(engine, races[0], state="requested", run_id=None, looked_at=NOW - STALE + dt.timedelta(seconds=1),
          checked=checked)
    with engine.begin() as conn:
        assert reclaim_unlaunched(conn, "results", NOW, stale_after=STALE) == []  # a second short of stale
        (found,) = reclaim_unlaunched(conn, "results", NOW + dt.timedelta(seconds=1), stale_after=STALE)
        assert reclaim_unlaunched(conn, "results", NOW + STALE, stale_after=STALE) == []
        assert len(reclaim_unlaunched(conn, "results", NOW + STALE + dt.timedelta(seconds=1), stale_after=STALE)) == 1
    assert found.race_id == races[0]
    assert row(engine, races[0]).checked_at == NOW + STALE + dt.timedelta(seconds=1)
    with engine.begin() as conn, pytest.raises(ValueError, match="now must be timezone-aware"):
        reclaim_unlaunched(conn, "results", NOW.replace(tzinfo=None), stale_after=STALE)


def test_stuck_rows_come_with_their_race_and_only_of_the_checkpoint(engine, races, sample_meetings) -> None:
    starts = {race.race_id: (race.start_time, race.status) for race in sample_meetings[0].races}
    for race_id, minutes in ((races[0], 30), (races[1], 10), (races[2], 20)):
        stuck(engine, race_id, state="running", run_id=f"run-{race_id}", looked_at=NOW - STALE)
        set_row(engine, race_id, scheduled_for=NOW + minutes * MINUTE, attempt=2, previous_run_id="run-0",
                next_attempt_at=NOW, relaunches=1, run_key=f"key-{race_id}")
    stuck(engine, races[3], state="requested", run_id=None, looked_at=NOW - STALE, checkpoint="t15")
    with engine.begin() as conn:
        found = reclaim_unlaunched(conn, "results", NOW, stale_after=STALE)
    assert [r.race_id for r in found] == [races[1], races[2], races[0]]  # by scheduled_for
    first = found[0]
    assert (first.attempt, first.previous_run_id, first.scheduled_for, first.next_attempt_at, first.state,
            first.run_id, first.relaunches, first.run_key, (first.start_time, first.status)) == (
        2, "run-0", NOW + 10 * MINUTE, NOW, "running", f"run-{races[1]}", 1, f"key-{races[1]}", starts[races[1]])
    assert row(engine, races[3], "t15").checked_at is None


def test_a_relaunch_counts_and_requests_the_row_again_only_as_the_sensor_saw_it(engine, races) -> None:
    stuck(engine, races[0], state="running", run_id="run-1", looked_at=NOW - STALE)
    set_row(engine, races[0], relaunches=1)
    later = NOW + MINUTE
    with engine.begin() as conn:
        assert record_relaunch(conn, races[0], "results", run_key="k", note="n", now=later, run_id="run-2") is False
        assert record_relaunch(conn, races[0], "results", run_key="k", note="n", now=later) is False  # it has a run
        assert record_relaunch(conn, races[0], "results", run_key="key-2", note="its run died", now=later,
                               run_id="run-1", state="requested_late") is True
    found = row(engine, races[0])
    assert (found.state, found.run_id, found.relaunches, found.run_key, found.note, found.requested_at,
            found.checked_at) == ("requested_late", None, 2, "key-2", "its run died", later, later)
    with engine.begin() as conn:  # now requested with no run: a relaunch without a run id matches it
        assert record_relaunch(conn, races[0], "results", run_key="key-3", note="again", now=later) is True
    assert (row(engine, races[0]).relaunches, row(engine, races[0]).state) == (3, "requested")


@pytest.mark.parametrize("ended", ["done", "waiting_final", "rescheduled"])
def test_a_row_a_run_finished_is_neither_relaunched_nor_given_up(engine, races, ended) -> None:
    stuck(engine, races[0], state=ended, run_id="run-1", looked_at=NOW - STALE)
    with engine.begin() as conn:
        assert record_relaunch(conn, races[0], "results", run_key="k", note="n", now=NOW, run_id="run-1") is False
        assert give_up_checkpoint(conn, races[0], "results", state="failed", note="n", run_id="run-1") is False
    assert (row(engine, races[0]).state, row(engine, races[0]).relaunches) == (ended, 0)


@pytest.mark.parametrize("step", ["update", "give_back", "await_next", "relaunch", "give_up"])
def test_every_step_stamps_the_rows_last_change(engine, races, step) -> None:
    """`updated_at` is when the row last changed: the audit's answer to "when did this checkpoint end"."""
    claim(engine, races[0])
    set_row(engine, races[0], state="running", run_id="run-1", updated_at=NOW - 60 * MINUTE)
    with engine.begin() as conn:
        database_now = conn.execute(sa.select(sa.func.now())).scalar()
        changed = {
            "update": lambda: update_checkpoint(conn, races[0], "results", note="n"),
            "give_back": lambda: reschedule_checkpoint(conn, races[0], "results", run_id="run-1",
                                                       scheduled_for=NOW, note="n"),
            "await_next": lambda: await_next_attempt(conn, races[0], "results", attempt=1, next_attempt_at=NOW,
                                                     run_id="run-1"),
            "relaunch": lambda: record_relaunch(conn, races[0], "results", run_key="k", note="n", now=NOW,
                                                run_id="run-1"),
            "give_up": lambda: give_up_checkpoint(conn, races[0], "results", state="failed", note="n",
                                                  run_id="run-1"),
        }[step]()
    assert changed is True
    assert row(engine, races[0]).updated_at == database_now  # the transaction's time


def test_a_row_given_up_ends_with_its_reason(engine, races) -> None:
    stuck(engine, races[0], state="requested", run_id=None, looked_at=NOW - STALE)
    stuck(engine, races[1], state="running", run_id="run-1", looked_at=NOW - STALE)
    with engine.begin() as conn:
        assert give_up_checkpoint(conn, races[0], "results", state="skipped", note="race abandoned") is True
        assert give_up_checkpoint(conn, races[1], "results", state="failed", note="x", run_id="run-9") is False
        assert give_up_checkpoint(conn, races[1], "t60", state="failed", note="x", run_id="run-1") is False
        assert give_up_checkpoint(conn, races[1], "results", state="failed", note="relaunched 3 times",
                                  run_id="run-1") is True
    assert (row(engine, races[0]).state, row(engine, races[0]).note) == ("skipped", "race abandoned")
    assert (row(engine, races[1]).state, row(engine, races[1]).note) == ("failed", "relaunched 3 times")
