"""Pure pandas logic of the market movers: fixed-win at T-60 and T-15 per runner, the finish and the move."""

from __future__ import annotations

import pandas as pd

MOVER_COLUMNS = ["race_id", "runner_number", "meeting_date", "win_t60", "win_t15", "finish_position", "move_pct"]


def market_movers_frame(odds: pd.DataFrame, results: pd.DataFrame, races: pd.DataFrame) -> pd.DataFrame:
    """One row per runner with a T-60 or T-15 fixed-win price.

    `odds`: race_id, runner_number, checkpoint, fixed_win; `results`: race_id, runner_number, position;
    `races`: race_id, meeting_date. move_pct = (t15 - t60) / t60 * 100 (negative: the price shortened).
    """
    if odds.empty:
        return pd.DataFrame(columns=MOVER_COLUMNS)
    prices = (
        odds[odds["checkpoint"].isin(["t60", "t15"])]
        .pivot_table(index=["race_id", "runner_number"], columns="checkpoint", values="fixed_win", aggfunc="last")
        .reindex(columns=["t60", "t15"])
        .rename(columns={"t60": "win_t60", "t15": "win_t15"})
        .reset_index()
    )
    prices.columns.name = None
    frame = prices.merge(races[["race_id", "meeting_date"]], on="race_id", how="left")
    finish = results.rename(columns={"position": "finish_position"})[["race_id", "runner_number", "finish_position"]]
    frame = frame.merge(finish, on=["race_id", "runner_number"], how="left")
    valid = frame["win_t60"].gt(0) & frame["win_t15"].notna()
    frame["move_pct"] = ((frame["win_t15"] - frame["win_t60"]) / frame["win_t60"] * 100).where(valid).round(2)
    frame["finish_position"] = frame["finish_position"].astype("Int64")
    return frame[MOVER_COLUMNS].sort_values(["race_id", "runner_number"], ignore_index=True)


def biggest_movers(frame: pd.DataFrame, top: int = 10) -> pd.DataFrame:
    """The day's largest moves either way, biggest absolute move first."""
    moved = frame.dropna(subset=["move_pct"])
    return moved.reindex(moved["move_pct"].abs().sort_values(ascending=False).index).head(top).reset_index(drop=True)
