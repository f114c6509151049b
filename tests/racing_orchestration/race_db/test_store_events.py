"""The real Awapuni R1 event (Final, 8 runners, Interim and Final dividends): runners, odds, results, dividends."""

from __future__ import annotations

import datetime as dt

import pytest
import sqlalchemy as sa

from racing_orchestration.race_db.queries import (
    dividends_for_race,
    final_dividends,
    odds_for_race,
    race_row,
    results_for_race,
    runners_for_race,
    table_counts,
)
from racing_orchestration.race_db.store import (
    UnknownRaceError,
    store_dividends,
    store_odds_snapshot,
    store_results,
    upsert_event,
    upsert_meetings,
)
from racing_orchestration.tab.models import Event, Meeting, Odds
from tests.racing_orchestration.race_db.conftest import snapshot

pytestmark = pytest.mark.integration

CAPTURED = dt.datetime(2025, 7, 16, 23, 50, tzinfo=dt.UTC)


@pytest.fixture
def stored_day(engine: sa.Engine, sample_meetings: list[Meeting], awapuni_event: Event) -> sa.Engine:
    """The database holding the event's meeting (the morning scrape's job), ready for its event data."""
    meeting = next(m for m in sample_meetings if m.meeting_id == awapuni_event.race.meeting_id)
    with engine.begin() as conn:
        upsert_meetings(conn, [meeting])
    return engine


def test_event_stored_twice_changes_nothing(stored_day: sa.Engine, awapuni_event: Event) -> None:
    race_id = awapuni_event.race.event_id
    with stored_day.begin() as conn:
        assert upsert_event(conn, awapuni_event) > 0
    with stored_day.connect() as conn:
        before = {t: snapshot(conn, t) for t in ("races", "runners")}
        row = race_row(conn, race_id)
        runners = runners_for_race(conn, race_id)
    assert (row.status, row.actual_start) == ("Final", awapuni_event.race.actual_start)
    assert [r.runner_number for r in runners] == list(range(1, 9))
    assert runners[1].name == "Frosbie"
    with stored_day.begin() as conn:
        assert upsert_event(conn, awapuni_event) == 0
    with stored_day.connect() as conn:
        assert {t: snapshot(conn, t) for t in ("races", "runners")} == before


def test_scratchings_and_start_time_change_from_event(stored_day: sa.Engine, awapuni_event: Event) -> None:
    with stored_day.begin() as conn:
        upsert_event(conn, awapuni_event)
    runners = list(awapuni_event.runners)
    scratch_time = dt.datetime(2025, 7, 16, 22, 0, tzinfo=dt.UTC)
    runners[2] = runners[2].model_copy(
        update={"is_scratched": True, "is_late_scratched": True, "scratch_time": scratch_time}
    )
    later = awapuni_event.race.advertised_start + dt.timedelta(minutes=4)
    changed = awapuni_event.model_copy(
        update={"runners": runners, "race": awapuni_event.race.model_copy(update={"advertised_start": later})}
    )
    with stored_day.begin() as conn:
        assert upsert_event(conn, changed) == 2  # the race row and one runner
        row = race_row(conn, changed.race.event_id)
        scratched = [r for r in runners_for_race(conn, changed.race.event_id) if r.is_scratched]
    assert (row.start_time, row.previous_start_time) == (later, awapuni_event.race.advertised_start)
    assert row.start_time_changed_at is not None
    assert [(r.runner_number, r.is_late_scratched, r.scratch_time) for r in scratched] == [(3, True, scratch_time)]


def test_event_of_unknown_meeting_is_refused_and_writes_nothing(engine: sa.Engine, awapuni_event: Event) -> None:
    with engine.begin() as conn, pytest.raises(UnknownRaceError) as excinfo:
        upsert_event(conn, awapuni_event)
    message = str(excinfo.value)
    assert awapuni_event.race.meeting_id in message and "Awapuni Synthetic" in message
    assert "store the meeting first" in message
    with engine.connect() as conn:
        assert set(table_counts(conn).values()) == {0}


def test_odds_snapshot_is_replaced_per_checkpoint_not_duplicated(stored_day: sa.Engine, awapuni_event: Event) -> None:
    race_id = awapuni_event.race.event_id
    with stored_day.begin() as conn:
        assert store_odds_snapshot(conn, race_id, "t60", awapuni_event.runners, CAPTURED, "run-a") == 8
        assert store_odds_snapshot(conn, race_id, "t60", awapuni_event.runners, CAPTURED, "run-a") == 0
        assert store_odds_snapshot(conn, race_id, "t15", awapuni_event.runners, CAPTURED, "run-b") == 8
    shortened = [r.model_copy(update={"odds": Odds(fixed_win=3.0)}) if r.runner_number == 2 else r
                 for r in awapuni_event.runners]  # fmt: skip
    retaken = CAPTURED + dt.timedelta(minutes=2)
    with stored_day.begin() as conn:
        # Re-taking T-60 (an operator re-fetch) replaces all 8 rows: new capture time and run id.
        assert store_odds_snapshot(conn, race_id, "t60", shortened, retaken, "run-c") == 8
        t60 = odds_for_race(conn, race_id, "t60")
        all_rows = odds_for_race(conn, race_id)
    assert len(t60) == 8 and len(all_rows) == 16
    assert {(r.captured_at, r.run_id) for r in t60} == {(retaken, "run-c")}
    assert next(r.fixed_win for r in t60 if r.runner_number == 2) == 3.0
    assert next(r.pool_place for r in t60 if r.runner_number == 8) == 9.2


@pytest.mark.parametrize(
    ("checkpoint", "captured_at", "message"),
    [
        ("T-60", CAPTURED, "checkpoint must be a short lower-case name"),
        ("", CAPTURED, "checkpoint must be"),
        ("t60", CAPTURED.replace(tzinfo=None), "captured_at must be timezone-aware"),
    ],
)
def test_odds_snapshot_bad_input(
    stored_day: sa.Engine, awapuni_event: Event, checkpoint: str, captured_at: dt.datetime, message: str
) -> None:
    with stored_day.begin() as conn, pytest.raises(ValueError, match=message):
        store_odds_snapshot(conn, awapuni_event.race.event_id, checkpoint, awapuni_event.runners, captured_at, None)


def test_writes_for_unknown_race_are_refused(stored_day: sa.Engine, awapuni_event: Event) -> None:
    with stored_day.begin() as conn:
        for store in (
            lambda: store_odds_snapshot(conn, "nope", "t60", awapuni_event.runners, CAPTURED, None),
            lambda: store_results(conn, "nope", awapuni_event.results, provisional=False),
            lambda: store_dividends(conn, "nope", awapuni_event.dividends),
        ):
            with pytest.raises(UnknownRaceError, match="race 'nope' is not in the race database"):
                store()
        # Empty lists are a no-op, not an error: a race before its result has none.
        assert store_odds_snapshot(conn, "nope", "t60", [], CAPTURED, None) == 0
        assert store_results(conn, "nope", [], provisional=True) == 0
        assert store_dividends(conn, "nope", []) == 0


def test_results_provisional_flag_flips_when_restored_final(stored_day: sa.Engine, awapuni_event: Event) -> None:
    race_id = awapuni_event.race.event_id
    interim = awapuni_event.results[:4]  # the interim result lists the placings only
    with stored_day.begin() as conn:
        assert store_results(conn, race_id, interim, provisional=True) == 4
        assert {r.is_provisional for r in results_for_race(conn, race_id)} == {True}
        assert store_results(conn, race_id, interim, provisional=True) == 0
    with stored_day.begin() as conn:
        assert store_results(conn, race_id, awapuni_event.results, provisional=False) == 8
        final = results_for_race(conn, race_id)
        assert store_results(conn, race_id, awapuni_event.results, provisional=False) == 0
    assert [(r.position, r.runner_number) for r in final[:3]] == [(1, 2), (2, 4), (3, 7)]
    assert len(final) == 8 and {r.is_provisional for r in final} == {False}
    # A protest reverses 1st and 2nd and the result is re-sent shorter: the old rows do not linger.
    swapped = [awapuni_event.results[1].model_copy(update={"position": 1}),
               awapuni_event.results[0].model_copy(update={"position": 2})]  # fmt: skip
    with stored_day.begin() as conn:
        assert store_results(conn, race_id, swapped, provisional=False) == 2 + 6
        assert [(r.position, r.runner_number) for r in results_for_race(conn, race_id)] == [(1, 4), (2, 2)]


def test_results_with_a_runner_twice_are_refused(stored_day: sa.Engine, awapuni_event: Event) -> None:
    race_id = awapuni_event.race.event_id
    doubled = [*awapuni_event.results[:2], awapuni_event.results[0]]
    with stored_day.begin() as conn:
        with pytest.raises(ValueError, match=r"runner\(s\) \[2\] more than once"):
            store_results(conn, race_id, doubled, provisional=False)
        assert results_for_race(conn, race_id) == []


def test_interim_and_final_dividends_are_kept_apart(stored_day: sa.Engine, awapuni_event: Event) -> None:
    race_id = awapuni_event.race.event_id
    with stored_day.begin() as conn:
        assert store_dividends(conn, race_id, awapuni_event.dividends) == 14
        assert store_dividends(conn, race_id, awapuni_event.dividends) == 0
        final = final_dividends(conn, race_id)
        interim = dividends_for_race(conn, race_id, status="interim")
    assert len(final) == 7 and len(interim) == 7
    assert {d.status for d in final} == {"Final"} and {d.status for d in interim} == {"Interim"}
    assert {d.dividend_id for d in final} == {d.dividend_id for d in awapuni_event.final_dividends()}
    assert sorted((d.product_name, d.dividend) for d in final) == [
        ("Pool First4", 1350.4), ("Pool Place", 1.7), ("Pool Place", 1.9), ("Pool Place", 3.7),
        ("Pool Quinella", 13.7), ("Pool Trifecta", 396.6), ("Pool Win", 6.6),
    ]  # fmt: skip
    win = next(d for d in final if d.product_name == "Pool Win")
    assert win.positions == [[2, 1]]


def test_interim_only_then_final_adds_rows_beside_interim(stored_day: sa.Engine, awapuni_event: Event) -> None:
    race_id = awapuni_event.race.event_id
    interim_rows = [d for d in awapuni_event.dividends if d.status == "Interim"]
    with stored_day.begin() as conn:
        store_dividends(conn, race_id, interim_rows)
        assert final_dividends(conn, race_id) == []  # provisional only: no Final set yet
        before = snapshot(conn, "dividends")
    with stored_day.begin() as conn:
        assert store_dividends(conn, race_id, awapuni_event.dividends) == 7
        after = snapshot(conn, "dividends")
    assert all(row in after for row in before) and len(after) == 14
