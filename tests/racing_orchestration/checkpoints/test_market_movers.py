"""Market movers: the rows (pure) and the daily asset over snapshots and results stored from the sim feed."""

import datetime as dt

import dagster as dg
import pytest

from racing_orchestration.checkpoints.movers import market_movers
from racing_orchestration.checkpoints.movers_rows import biggest_movers, market_movers_rows
from racing_orchestration.race_db.movers import market_movers_for_day
from racing_orchestration.race_db.store import store_odds_snapshot, store_results, upsert_event
from racing_orchestration.tab.sim_engine import SimFeed, SimFeedConfig
from tests.racing_orchestration.checkpoint_support import Clock, fetch_event, seed_day

DAY = dt.date(2026, 11, 29)


@pytest.mark.unit
@pytest.mark.parametrize(
    ("t60", "t15", "move"),
    [(4.0, 3.0, -25.0), (2.0, 3.0, 50.0), (5.0, None, None), (None, 5.0, None), (0.0, 2.0, None)],
)
def test_move_percent(t60, t15, move) -> None:
    odds = [
        {"race_id": "r1", "runner_number": 1, "checkpoint": cp, "fixed_win": price}
        for cp, price in (("t60", t60), ("t15", t15)) if price is not None
    ] + [{"race_id": "r1", "runner_number": 2, "checkpoint": cp, "fixed_win": 3.0} for cp in ("t60", "t15")]
    results = [{"race_id": "r1", "runner_number": 2, "position": 1}]
    races = [{"race_id": "r1", "meeting_date": DAY}]
    by_runner = {row["runner_number"]: row for row in market_movers_rows(odds, results, races)}
    got = by_runner[1]["move_pct"]
    assert (got is None if move is None else got == move)
    assert by_runner[2]["finish_position"] == 1 and by_runner[1]["finish_position"] is None
    assert by_runner[2]["move_pct"] == 0.0


@pytest.mark.unit
def test_rows_per_runner_in_race_and_runner_order_with_the_last_price_of_each_checkpoint() -> None:
    odds = [
        {"race_id": "r2", "runner_number": 1, "checkpoint": "t60", "fixed_win": 3.0},
        {"race_id": "r1", "runner_number": 10, "checkpoint": "t15", "fixed_win": 7.0},
        {"race_id": "r1", "runner_number": 2, "checkpoint": "t60", "fixed_win": 3.0},
        {"race_id": "r1", "runner_number": 2, "checkpoint": "t60", "fixed_win": 6.0},  # a later price replaces it
        {"race_id": "r1", "runner_number": 2, "checkpoint": "t15", "fixed_win": 4.0},
        {"race_id": "r1", "runner_number": 2, "checkpoint": "t15", "fixed_win": None},  # no price: the 4.0 stands
        {"race_id": "r1", "runner_number": 3, "checkpoint": "t5", "fixed_win": 2.0},  # not a mover checkpoint
        {"race_id": "r1", "runner_number": 4, "checkpoint": "t60", "fixed_win": None},  # no price at all: no row
        {"race_id": "r2", "runner_number": 1, "checkpoint": "t15", "fixed_win": 2.0},
    ]
    races = [{"race_id": "r1", "meeting_date": DAY}]  # r2 unknown: no meeting date
    rows = market_movers_rows(odds, [], races)
    assert [(r["race_id"], r["runner_number"]) for r in rows] == [("r1", 2), ("r1", 10), ("r2", 1)]
    assert rows[0] == {"race_id": "r1", "runner_number": 2, "meeting_date": DAY, "win_t60": 6.0, "win_t15": 4.0,
                       "finish_position": None, "move_pct": -33.33}
    assert rows[1]["win_t60"] is None and rows[1]["move_pct"] is None
    assert rows[2]["meeting_date"] is None and rows[2]["move_pct"] == -33.33
    assert market_movers_rows([], [], races) == []


@pytest.mark.unit
def test_biggest_movers_rank_by_absolute_move() -> None:
    rows = [{"race_id": race, "runner_number": runner, "move_pct": move}
            for race, runner, move in [("a", 1, -30.0), ("a", 2, 10.0), ("b", 1, 45.0), ("b", 2, None)]]
    assert [row["move_pct"] for row in biggest_movers(rows, top=2)] == [45.0, -30.0]


@pytest.mark.integration
def test_market_movers_asset_writes_the_table_and_a_markdown_table(pg_instance, race_db) -> None:
    clock = Clock(dt.datetime(2026, 11, 28, 17, 0, tzinfo=dt.UTC))
    feed = SimFeed(SimFeedConfig(seed=7), now=clock)
    seed_day(feed, race_db, DAY, countries=("NZ",))
    races = [r for m in feed.day(DAY) if m.country == "NZ" for r in m.races if r.abandoned_at is None][:4]
    for race in races:
        for checkpoint, at in (("t60", race.scheduled_start - dt.timedelta(minutes=60)),
                               ("t15", race.scheduled_start - dt.timedelta(minutes=15))):
            clock.now = at
            event = fetch_event(feed, race.race_id)
            with race_db.begin() as conn:
                upsert_event(conn, event)
                store_odds_snapshot(conn, race.race_id, checkpoint, event.runners, at, None)
        clock.now = race.jump() + dt.timedelta(minutes=10)
        event = fetch_event(feed, race.race_id)
        assert event.is_final
        with race_db.begin() as conn:
            store_results(conn, race.race_id, event.results, provisional=False)
    result = dg.materialize([market_movers], partition_key=DAY.isoformat(), instance=pg_instance,
                            resources={"race_db": race_db})
    assert result.success
    with race_db.connect() as conn:
        rows = market_movers_for_day(conn, DAY)
    assert len(rows) == sum(len(r.runners) for r in races)
    moved = [r for r in rows if r.move_pct is not None]
    assert moved and all(abs(r.move_pct - (r.win_t15 - r.win_t60) / r.win_t60 * 100) < 0.01 for r in moved)
    assert abs(rows[0].move_pct) == max(abs(r.move_pct) for r in moved)  # biggest mover first
    winners = [r for r in rows if r.finish_position == 1]
    assert len(winners) == len(races)
    metadata = result.asset_materializations_for_node("market_movers")[0].metadata
    table = metadata["biggest_movers"].value
    assert table.startswith("|") and "move_pct" in table and str(rows[0].race_id) in table
    assert metadata["runners"].value == len(rows)
    # Materializing again writes nothing new (idempotent).
    again = dg.materialize([market_movers], partition_key=DAY.isoformat(), instance=pg_instance,
                           resources={"race_db": race_db})
    assert again.asset_materializations_for_node("market_movers")[0].metadata["rows_written"].value == 0
