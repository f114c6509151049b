"""Do the recorded asset checks tell the truth? Each check's latest recorded evaluation for one racing day, compared
with a fresh evaluation of the same rule over what the race database holds now (`racing verify-checks`).

The checks compared are every asset check of the racing location: the three card checks of `race_cards` and the two
completeness checks of `racing_day`. A check with no evaluation recorded for the day (a `racing_day` check before the
day's last race has settled, tomorrow's card before its scrape) is counted as unrecorded, not compared. A mismatch is
a check whose latest recorded outcome (passed / failed) differs from the fresh one: the data it judges changed and no
run recorded it again, or time alone moved it (a race reaching its jump without a T-60 run), which no run records.

The comparison holds the day's card lock (`lock_card_day`): a run recording the day's card checks finishes first, so
its evaluation is compared, not a half-written state.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterator
from dataclasses import dataclass

import dagster as dg
import sqlalchemy as sa

from racing_orchestration.checkpoints.racing_day import PRE_RACE_CHECK, RESULTS_CHECK, figure_passed
from racing_orchestration.race_data.card_checks import CARD_CHECK_SPECS, card_checks, card_facts, lock_card_day
from racing_orchestration.race_data.catalog import RACE_CARDS, RACING_DAY
from racing_orchestration.race_db.completeness import (
    PRE_RACE_CHECKPOINTS,
    RESULTS,
    day_completeness,
    race_facts_for_day,
)

RACING_DAY_CHECKS = (PRE_RACE_CHECK, RESULTS_CHECK)
CHECK_KEYS = (
    *(dg.AssetCheckKey(RACE_CARDS, spec.name) for spec in CARD_CHECK_SPECS),
    *(dg.AssetCheckKey(RACING_DAY, name) for name in RACING_DAY_CHECKS),
)
# Each page of a check's history read while looking for the day's latest evaluation, and how many pages at most: a
# day has a few hundred card-check evaluations (one per checkpoint run), so older days are found within these.
HISTORY_PAGE = 200
MAX_HISTORY_PAGES = 100


@dataclass(frozen=True)
class Mismatch:
    check: str  # the check key as the UI spells it, e.g. race_cards:races_have_runners
    partition: str
    recorded: str  # passed / failed
    now: str

    def to_json(self) -> dict[str, str]:
        return {"check": self.check, "partition": self.partition, "recorded": self.recorded, "now": self.now}


@dataclass(frozen=True)
class Verification:
    day: dt.date
    checked: int
    mismatches: tuple[Mismatch, ...]
    unrecorded: tuple[str, ...]

    def to_json(self) -> dict[str, object]:
        """The stable JSON of `racing verify-checks --json` (the soak bench reads it)."""
        return {"day": self.day.isoformat(), "checked": self.checked,
                "mismatches": [m.to_json() for m in self.mismatches]}


def outcome(passed: bool) -> str:
    return "passed" if passed else "failed"


def fresh_outcomes(conn: sa.Connection, day: dt.date, now: dt.datetime, tz: str) -> dict[dg.AssetCheckKey, bool]:
    """Every check's rule evaluated over what the race database holds now, at `now`."""
    fresh = {dg.AssetCheckKey(RACE_CARDS, c.name): c.passed for c in card_checks(card_facts(conn, day), now, tz)}
    figures = day_completeness(race_facts_for_day(conn, day), now)
    fresh[dg.AssetCheckKey(RACING_DAY, PRE_RACE_CHECK)] = figure_passed(figures.figure_group(PRE_RACE_CHECKPOINTS))
    fresh[dg.AssetCheckKey(RACING_DAY, RESULTS_CHECK)] = figure_passed(figures.figures[RESULTS])
    return fresh


def _evaluations(instance: dg.DagsterInstance, key: dg.AssetCheckKey) -> Iterator[tuple[object, object]]:
    """(record, evaluation) of `key`'s completed evaluations, newest first."""
    cursor = None
    for _ in range(MAX_HISTORY_PAGES):
        records = instance.event_log_storage.get_asset_check_execution_history(key, limit=HISTORY_PAGE, cursor=cursor)
        for record in records:
            event = record.event.dagster_event if record.event is not None else None
            if event is not None and event.event_type == dg.DagsterEventType.ASSET_CHECK_EVALUATION:
                yield record, event.event_specific_data
        if len(records) < HISTORY_PAGE:
            return
        cursor = records[-1].id


def _of_day(record, evaluation, partition: str) -> bool:
    """The evaluation judged `partition`: its partition, or, for the racing_day checks (recorded without a partition
    by an asset step in Dagster 1.13), the `day` in their metadata."""
    if record.partition is not None:
        return record.partition == partition
    day = evaluation.metadata.get("day")
    return getattr(day, "value", day) == partition


def latest_recorded(instance: dg.DagsterInstance, key: dg.AssetCheckKey, day: dt.date) -> bool | None:
    """Whether `key`'s latest evaluation recorded for `day` passed; None when none is recorded."""
    partition = day.isoformat()
    for record, evaluation in _evaluations(instance, key):
        if _of_day(record, evaluation, partition):
            return bool(evaluation.passed)
    return None


def compare(recorded: dict[dg.AssetCheckKey, bool | None], fresh: dict[dg.AssetCheckKey, bool],
            day: dt.date) -> Verification:
    """Pure: the checks whose recorded outcome differs from the fresh one (in CHECK_KEYS order)."""
    partition = day.isoformat()
    mismatches = tuple(Mismatch(key.to_user_string(), partition, outcome(recorded[key]), outcome(fresh[key]))
                       for key in CHECK_KEYS if recorded.get(key) is not None and recorded[key] != fresh[key])
    unrecorded = tuple(key.to_user_string() for key in CHECK_KEYS if recorded.get(key) is None)
    return Verification(day, len(CHECK_KEYS) - len(unrecorded), mismatches, unrecorded)


def verify_day(instance: dg.DagsterInstance, engine: sa.Engine, day: dt.date, now: dt.datetime,
               tz: str) -> Verification:
    """Every check's latest recorded outcome for `day` against a fresh evaluation at `now`, under the day's lock."""
    with engine.begin() as conn:
        lock_card_day(conn, day)
        recorded = {key: latest_recorded(instance, key, day) for key in CHECK_KEYS}
        fresh = fresh_outcomes(conn, day, now, tz)
    return compare(recorded, fresh, day)
