"""A racing day's completeness: the classification (pure, parametrized) and the facts read from a real race database."""

import datetime as dt

import pytest
import sqlalchemy as sa

from racing_orchestration.race_db import schema
from racing_orchestration.race_db.completeness import (
    ItemClass,
    LedgerEntry,
    RaceFacts,
    classify_results,
    classify_snapshot,
    day_completeness,
    last_start_of_day,
    race_facts_for_day,
)

START = dt.datetime(2026, 11, 29, 3, 0, tzinfo=dt.UTC)
C, E, P, M = ItemClass.CAPTURED, ItemClass.EXPLAINED, ItemClass.PENDING, ItemClass.MISSING


def race(status="Final", snapshots=(), final=False, provisional=False, **ledger: tuple[str, str | None]) -> RaceFacts:
    return RaceFacts("r1", START, status, frozenset(snapshots), final, provisional,
                     {cp: LedgerEntry(*entry) for cp, entry in ledger.items()})


@pytest.mark.unit
@pytest.mark.parametrize(
    ("facts", "expected", "reason"),
    [
        (race(snapshots=["t60"], t60=("done", None)), C, "snapshot stored"),
        (race(snapshots=["t60"]), C, "snapshot stored"),  # a manual re-fetch leaves the ledger alone
        (race(t60=("skipped", "missed by 900 s: race already started")), E, "skipped: missed by 900 s"),
        (race(t60=("failed", "T-60 fetch failed after 3 attempts")), E, "failed: T-60 fetch failed"),
        (race(status="Abandoned", t60=("abandoned", None)), E, "abandoned"),
        (race(status="Abandoned"), E, "race abandoned (TAB status)"),
        (race(t60=("requested", None)), P, "requested"),
        (race(t60=("running", None)), P, "running"),
        (race(t60=("done", None)), M, "ledger says done but no snapshot rows"),
        (race(), M, "no snapshot and no ledger row"),
        (race(snapshots=["t15"]), M, "no snapshot and no ledger row"),  # the other checkpoint does not count
    ],
)
def test_snapshot_classes(facts: RaceFacts, expected: ItemClass, reason: str) -> None:
    item = classify_snapshot(facts, "t60")
    assert (item.item_class, item.figure) == (expected, "t60")
    assert item.reason.startswith(reason)


@pytest.mark.unit
@pytest.mark.parametrize(
    ("facts", "expected", "reason"),
    [
        (race(final=True, post=("done", None)), C, "Final results stored"),
        (race(final=True), C, "Final results stored"),
        (race(status="Interim", provisional=True, post=("provisional", "race still Interim after 4 checks")), E,
         "provisional: race still Interim"),
        (race(status="Interim", provisional=True), E, "results stored flagged provisional"),
        (race(status="Interim", provisional=True, post=("waiting_final", "attempt 1 due")), P, "waiting_final"),
        (race(status="Open", post=("requested_late", None)), P, "requested_late"),
        (race(status="Open", post=("failed", "results fetch failed")), M, "no Final results (failed: results fetch"),
        (race(status="Open", post=("skipped", "missed by 11000 s")), M, "no Final results (skipped"),
        (race(status="Final"), M, "no Final results and no ledger row"),
    ],
)
def test_results_classes(facts: RaceFacts, expected: ItemClass, reason: str) -> None:
    item = classify_results(facts)
    assert (item.item_class, item.figure) == (expected, "results")
    assert item.reason.startswith(reason)


def _at(minutes: float) -> dt.datetime:
    return START + dt.timedelta(minutes=minutes)


@pytest.mark.unit
@pytest.mark.parametrize(
    ("status", "now", "started", "finished"),
    [
        ("Open", _at(-1), False, False),
        ("Open", _at(0), True, False),  # past its start time: the pre-race snapshots were due
        ("Closed", _at(-3), True, False),  # TAB closed it early (start time not moved yet)
        ("Open", _at(4), True, False),
        ("Open", _at(5), True, True),  # the post-race checkpoint is due: counted as finished whatever TAB says
        ("Interim", _at(2), True, True),
        ("Abandoned", _at(60), True, False),  # never finishes: no results expected
    ],
)
def test_which_races_are_expected_at_now(status: str, now: dt.datetime, started: bool, finished: bool) -> None:
    day = day_completeness([race(status=status)], now)
    assert (day.started, day.finished) == (int(started), int(finished))
    assert day.figures["t60"].expected == int(started) and day.figures["results"].expected == int(finished)


@pytest.mark.unit
def test_day_figures_count_every_class_and_list_the_gaps() -> None:
    races = [
        RaceFacts("a", START, "Final", frozenset({"t60", "t15"}), True, False, {}),
        RaceFacts("b", START, "Final", frozenset({"t60"}), False, True,
                  {"t15": LedgerEntry("failed", "fetch failed"), "post": LedgerEntry("provisional", "still Interim")}),
        RaceFacts("c", START, "Open", frozenset(), False, False, {"t60": LedgerEntry("skipped", "missed")}),
        RaceFacts("d", START + dt.timedelta(hours=5), "Open", frozenset(), False, False, {}),  # not started yet
    ]
    day = day_completeness(races, START + dt.timedelta(minutes=30))
    t60, t15, results = day.figures["t60"], day.figures["t15"], day.figures["results"]
    assert (day.races, day.started, day.finished, day.abandoned) == (4, 3, 3, 0)
    assert (t60.counts[C], t60.counts[E], t60.counts[M], t60.ratio) == (2, 1, 0, 1.0)
    assert (t15.counts[C], t15.counts[E], t15.counts[M]) == (1, 1, 1)
    assert [(g.race_id, g.item_class) for g in t15.gaps] == [("c", M)]
    assert (results.counts[C], results.counts[E], results.counts[M]) == (1, 1, 1)
    assert results.ratio == pytest.approx(2 / 3)
    both = day.figure_group(("t60", "t15"))
    assert (both.expected, both.complete, [g.figure for g in both.gaps]) == (6, 5, ["t15"])


@pytest.mark.unit
def test_an_empty_day_is_complete_and_naive_now_is_refused() -> None:
    day = day_completeness([], START)
    assert all(f.ratio == 1.0 and f.expected == 0 for f in day.figures.values())
    with pytest.raises(ValueError, match="timezone-aware"):
        day_completeness([], START.replace(tzinfo=None))


DAY = dt.date(2026, 11, 29)


def _seed(conn: sa.Connection) -> None:
    conn.execute(sa.insert(schema.meetings), [
        {"meeting_id": "m1", "name": "Ellerslie", "meeting_date": DAY, "category": "T", "country": "NZ"},
        {"meeting_id": "m0", "name": "Trentham", "meeting_date": DAY - dt.timedelta(days=1), "category": "T",
         "country": "NZ"},
    ])
    conn.execute(sa.insert(schema.races), [
        {"race_id": "r1", "meeting_id": "m1", "race_number": 1, "name": "R1", "start_time": START, "status": "Final"},
        {"race_id": "r2", "meeting_id": "m1", "race_number": 2, "name": "R2", "start_time": _at(30),
         "status": "Interim"},
        {"race_id": "r0", "meeting_id": "m0", "race_number": 1, "name": "R0", "start_time": _at(-1440),
         "status": "Final"},
    ])
    snapshot = {"fixed_win": 3.0, "captured_at": START, "is_scratched": False}
    conn.execute(sa.insert(schema.odds_snapshots), [
        {"race_id": "r1", "runner_number": n, "checkpoint": cp, **snapshot} for n in (1, 2) for cp in ("t60", "t15")
    ] + [{"race_id": "r2", "runner_number": 1, "checkpoint": "t60", **snapshot},
         {"race_id": "r0", "runner_number": 1, "checkpoint": "t15", **snapshot}])
    conn.execute(sa.insert(schema.results), [
        {"race_id": "r1", "runner_number": 1, "position": 1, "is_provisional": False},
        {"race_id": "r2", "runner_number": 1, "position": 1, "is_provisional": True},
    ])
    conn.execute(sa.insert(schema.race_checkpoints), [
        {"race_id": "r2", "checkpoint": "t15", "scheduled_for": _at(15), "state": "failed", "note": "fetch failed"},
        {"race_id": "r2", "checkpoint": "post", "scheduled_for": _at(35), "state": "waiting_final", "note": "attempt 1"},
    ])


@pytest.mark.integration
def test_race_facts_for_day_reads_snapshots_results_and_ledger(engine: sa.Engine) -> None:
    with engine.begin() as conn:
        _seed(conn)
    with engine.connect() as conn:
        facts = {f.race_id: f for f in race_facts_for_day(conn, DAY)}
        assert last_start_of_day(conn, DAY) == _at(30)
        assert last_start_of_day(conn, DAY + dt.timedelta(days=1)) is None
    assert set(facts) == {"r1", "r2"}  # r0 belongs to the day before
    assert facts["r1"].snapshots == {"t60", "t15"} and facts["r1"].final_results and not facts["r1"].ledger
    r2 = facts["r2"]
    assert r2.snapshots == {"t60"} and r2.provisional_results and not r2.final_results
    assert r2.ledger == {"t15": LedgerEntry("failed", "fetch failed"), "post": LedgerEntry("waiting_final", "attempt 1")}
    day = day_completeness(list(facts.values()), _at(120))
    assert day.figure_group(("t60", "t15")).counts == {C: 3, E: 1, P: 0, M: 0}
    assert day.figures["results"].counts == {C: 1, E: 0, P: 1, M: 0}
