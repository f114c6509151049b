"""Pure logic of the market movers: fixed-win at T-60 and T-15 per runner, the finish and the move.

Plain Python over rows (mappings): a racing day is a few hundred runners, and without pandas and numpy the user-code
image is ~160 MB smaller (BENCHMARKS.md "Image sizes").
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

MOVER_COLUMNS = ("race_id", "runner_number", "meeting_date", "win_t60", "win_t15", "finish_position", "move_pct")
CHECKPOINT_COLUMNS = {"t60": "win_t60", "t15": "win_t15"}


def market_movers_rows(
    odds: Iterable[Mapping[str, Any]], results: Iterable[Mapping[str, Any]], races: Iterable[Mapping[str, Any]]
) -> list[dict[str, Any]]:
    """One row per runner with a T-60 or T-15 fixed-win price, ordered by race and runner; missing values are None.

    `odds`: race_id, runner_number, checkpoint, fixed_win; `results`: race_id, runner_number, position;
    `races`: race_id, meeting_date. move_pct = (t15 - t60) / t60 * 100 rounded to 2 places (negative: the price
    shortened), None without both prices or when the T-60 price is not positive. Of several prices for one runner and
    checkpoint the last one counts; a missing price (None) is no price.
    """
    prices: dict[tuple[Any, Any], dict[str, float]] = {}
    for row in odds:
        column = CHECKPOINT_COLUMNS.get(row["checkpoint"])
        if column is not None and row["fixed_win"] is not None:
            prices.setdefault((row["race_id"], row["runner_number"]), {})[column] = row["fixed_win"]
    meeting_dates = {race["race_id"]: race["meeting_date"] for race in races}
    finishes = {(r["race_id"], r["runner_number"]): r["position"] for r in results}
    rows = []
    for key in sorted(prices):
        win_t60, win_t15 = prices[key].get("win_t60"), prices[key].get("win_t15")
        race_id, runner_number = key
        rows.append({
            "race_id": race_id,
            "runner_number": runner_number,
            "meeting_date": meeting_dates.get(race_id),
            "win_t60": win_t60,
            "win_t15": win_t15,
            "finish_position": finishes.get(key),
            "move_pct": move_percent(win_t60, win_t15),
        })
    return rows


def move_percent(win_t60: float | None, win_t15: float | None) -> float | None:
    """(t15 - t60) / t60 * 100, rounded to 2 places; None unless both prices are there and the T-60 one is positive."""
    if win_t60 is None or win_t15 is None or win_t60 <= 0:
        return None
    return round((win_t15 - win_t60) / win_t60 * 100, 2)


def biggest_movers(rows: Iterable[Mapping[str, Any]], top: int = 10) -> list[Mapping[str, Any]]:
    """The day's largest moves either way, biggest absolute move first (ties keep their order)."""
    moved = [row for row in rows if row["move_pct"] is not None]
    return sorted(moved, key=lambda row: abs(row["move_pct"]), reverse=True)[:top]
