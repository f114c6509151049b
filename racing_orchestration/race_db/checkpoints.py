"""The `race_checkpoints` ledger: one claimed row per (race, checkpoint), so a checkpoint is requested once only,
even after a daemon restart or after the cleanup job has deleted old Dagster runs (run_key dedupe would not)."""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterable

import sqlalchemy as sa
from sqlalchemy.dialects.postgresql import insert as pg_insert

from racing_orchestration.race_db import schema
from racing_orchestration.race_db.upsert import require_aware

_ledger = schema.race_checkpoints


def claim_checkpoint(
    conn: sa.Connection,
    race_id: str,
    checkpoint: str,
    scheduled_for: dt.datetime,
    *,
    state: str = "requested",
    note: str | None = None,
    requested_at: dt.datetime | None = None,
    run_key: str | None = None,
) -> bool:
    """Record that `checkpoint` of `race_id` is being requested; False if it was already claimed (do not request).

    A row `rescheduled` by a run that gave way (its race's start moved) counts as unclaimed: it is taken over in the
    same statement (ON CONFLICT ... DO UPDATE WHERE state = 'rescheduled'), so it is still claimed once.
    """
    require_aware(scheduled_for, "scheduled_for")
    values = dict(race_id=race_id, checkpoint=checkpoint, scheduled_for=scheduled_for, state=state, note=note,
                  run_key=run_key)
    if requested_at is not None:  # the sensor's clock, so the launch-gap check compares like with like
        require_aware(requested_at, "requested_at")
        values["requested_at"] = requested_at
    insert = pg_insert(_ledger).values(**values)
    stmt = (
        insert.on_conflict_do_update(
            index_elements=["race_id", "checkpoint"],
            set_={"scheduled_for": insert.excluded.scheduled_for, "state": insert.excluded.state,
                  "note": insert.excluded.note, "run_key": insert.excluded.run_key,
                  "requested_at": insert.excluded.requested_at, "run_id": None, "relaunches": 0, "checked_at": None,
                  "updated_at": sa.func.now()},
            where=_ledger.c.state == RESCHEDULED,
        )
        .returning(_ledger.c.race_id)
    )
    return conn.execute(stmt).first() is not None


# A run found its race's start moved so far that it gave way: the sensor requests the checkpoint again at the new
# time (`scheduled_for` holds it) under a new run key.
RESCHEDULED = "rescheduled"


def reschedule_checkpoint(conn: sa.Connection, race_id: str, checkpoint: str, *, run_id: str,
                          scheduled_for: dt.datetime, note: str) -> bool:
    """The run `run_id` gives the checkpoint back to the sensor, due at `scheduled_for` (only while it holds it)."""
    require_aware(scheduled_for, "scheduled_for")
    stmt = (
        sa.update(_ledger)
        .where(_ledger.c.race_id == race_id, _ledger.c.checkpoint == checkpoint, _ledger.c.run_id == run_id,
               _ledger.c.state == "running")
        .values(state=RESCHEDULED, scheduled_for=scheduled_for, note=note, updated_at=sa.func.now())
    )
    return conn.execute(stmt).rowcount == 1


def update_checkpoint(
    conn: sa.Connection,
    race_id: str,
    checkpoint: str,
    *,
    state: str | None = None,
    run_id: str | None = None,
    note: str | None = None,
) -> bool:
    """Set the state / run id / note of a claimed checkpoint (only the given fields); False if not claimed."""
    values = {k: v for k, v in {"state": state, "run_id": run_id, "note": note}.items() if v is not None}
    if not values:
        raise ValueError("update_checkpoint needs at least one of state, run_id, note")
    stmt = (
        sa.update(_ledger)
        .where(_ledger.c.race_id == race_id, _ledger.c.checkpoint == checkpoint)
        .values(**values, updated_at=sa.func.now())
    )
    return conn.execute(stmt).rowcount == 1


def claimed_checkpoints(conn: sa.Connection, race_ids: Iterable[str], checkpoint: str) -> set[str]:
    """Which of `race_ids` already have `checkpoint` in the ledger."""
    ids = list(race_ids)
    if not ids:
        return set()
    query = sa.select(_ledger.c.race_id).where(_ledger.c.checkpoint == checkpoint, _ledger.c.race_id.in_(ids))
    return set(conn.execute(query).scalars())


def checkpoint_row(conn: sa.Connection, race_id: str, checkpoint: str, *, lock: bool = False) -> sa.Row | None:
    """The ledger row; `lock` holds it (FOR UPDATE) until the transaction ends, for a read-then-write."""
    query = sa.select(_ledger).where(_ledger.c.race_id == race_id, _ledger.c.checkpoint == checkpoint)
    return conn.execute(query.with_for_update() if lock else query).first()


# Rows in these states have been requested but not (yet) picked up by a run.
REQUESTED_STATES = ("requested", "requested_late")


def await_next_attempt(
    conn: sa.Connection, race_id: str, checkpoint: str, *, attempt: int, next_attempt_at: dt.datetime, run_id: str,
    note: str | None = None,
) -> bool:
    """Attempt `attempt` ran and the race is not Final: the sensor requests attempt+1 once `next_attempt_at` passes."""
    require_aware(next_attempt_at, "next_attempt_at")
    stmt = (
        sa.update(_ledger)
        .where(_ledger.c.race_id == race_id, _ledger.c.checkpoint == checkpoint)
        .values(state="waiting_final", attempt=attempt, next_attempt_at=next_attempt_at, run_id=run_id, note=note,
                updated_at=sa.func.now())
    )
    return conn.execute(stmt).rowcount == 1


_CLAIM_DUE_ATTEMPTS = sa.text("""
WITH due AS (
    SELECT race_id, checkpoint, attempt, run_id, next_attempt_at FROM race_checkpoints
    WHERE checkpoint = :checkpoint AND state = 'waiting_final' AND next_attempt_at <= :due_before
    ORDER BY next_attempt_at, race_id LIMIT :limit FOR UPDATE SKIP LOCKED
)
UPDATE race_checkpoints AS l
SET state = 'requested', attempt = due.attempt + 1, previous_run_id = due.run_id, run_id = NULL,
    relaunches = 0, run_key = NULL, checked_at = NULL, requested_at = :now, updated_at = now()
FROM due
WHERE l.race_id = due.race_id AND l.checkpoint = due.checkpoint AND l.state = 'waiting_final'
  AND l.attempt = due.attempt
RETURNING l.race_id, l.attempt, l.previous_run_id, l.scheduled_for, due.next_attempt_at AS due_at
""")


def claim_due_attempts(conn: sa.Connection, checkpoint: str, now: dt.datetime, limit: int = 200,
                       ahead: dt.timedelta = dt.timedelta(0)) -> list[sa.Row]:
    """Claim every `waiting_final` row whose next attempt is due by `now + ahead` (one UPDATE ... RETURNING: a row is
    claimed once). `next_attempt_at` stays on the claimed row: it is the attempt's target, which its run waits for
    and a re-request keeps."""
    require_aware(now, "now")
    params = {"checkpoint": checkpoint, "now": now, "due_before": now + ahead, "limit": limit}
    return sorted(conn.execute(_CLAIM_DUE_ATTEMPTS, params), key=lambda r: (r.due_at, r.race_id))


_RECLAIM_UNLAUNCHED = sa.text("""
UPDATE race_checkpoints AS l
SET checked_at = :now
FROM races AS r
WHERE l.checkpoint = :checkpoint
  AND ((l.state IN ('requested', 'requested_late') AND l.run_id IS NULL) OR (l.state = 'running' AND l.run_id IS NOT NULL))
  AND COALESCE(l.checked_at, l.requested_at) <= :stale_before AND r.race_id = l.race_id
RETURNING l.race_id, l.attempt, l.previous_run_id, l.scheduled_for, l.next_attempt_at, l.state, l.run_id,
          l.relaunches, l.run_key, r.start_time, r.status
""")

# A row in one of these states may be stuck: requested and no run took it, or running and its run died.
UNFINISHED_STATES = (*REQUESTED_STATES, "running")


def reclaim_unlaunched(conn: sa.Connection, checkpoint: str, now: dt.datetime, *, stale_after: dt.timedelta) -> list[sa.Row]:
    """Rows not looked at for `stale_after` that no run has finished: requested with no run (the daemon crashed
    between claim and launch, or the run failed / was canceled before it reached the ledger, e.g. the database was
    down), or `running` (its run may have died without recording the end).

    Their `checked_at` moves to `now` so each is looked at again only after another `stale_after`; the caller
    decides per row (with the race's start time and status, returned too) whether to request it again or end it.
    """
    require_aware(now, "now")
    params = {"checkpoint": checkpoint, "now": now, "stale_before": now - stale_after}
    return sorted(conn.execute(_RECLAIM_UNLAUNCHED, params), key=lambda r: (r.scheduled_for, r.race_id))


def _unfinished(race_id: str, checkpoint: str, run_id: str | None) -> list[sa.ColumnElement]:
    """Still as the sensor saw it: requested with no run, or running under the same run."""
    run = _ledger.c.run_id.is_(None) if run_id is None else _ledger.c.run_id == run_id
    return [_ledger.c.race_id == race_id, _ledger.c.checkpoint == checkpoint, _ledger.c.state.in_(UNFINISHED_STATES), run]


def record_relaunch(conn: sa.Connection, race_id: str, checkpoint: str, *, run_key: str, note: str, now: dt.datetime,
                    run_id: str | None = None, state: str = "requested") -> bool:
    """The row (seen with `run_id`) is requested again under `run_key`: count it, so the re-requests stay bounded."""
    stmt = (
        sa.update(_ledger)
        .where(*_unfinished(race_id, checkpoint, run_id))
        .values(state=state, run_id=None, relaunches=_ledger.c.relaunches + 1, run_key=run_key, note=note,
                requested_at=now, checked_at=now, updated_at=sa.func.now())
    )
    return conn.execute(stmt).rowcount == 1


def give_up_checkpoint(conn: sa.Connection, race_id: str, checkpoint: str, *, state: str, note: str,
                       run_id: str | None = None) -> bool:
    """A row no run finished and that is not requested again ends `state` (failed / skipped) with the reason."""
    stmt = (
        sa.update(_ledger)
        .where(*_unfinished(race_id, checkpoint, run_id))
        .values(state=state, note=note, updated_at=sa.func.now())
    )
    return conn.execute(stmt).rowcount == 1


def next_attempt_due(conn: sa.Connection, checkpoint: str) -> dt.datetime | None:
    """The earliest pending next attempt (for the sensor's skip message)."""
    query = sa.select(sa.func.min(_ledger.c.next_attempt_at)).where(
        _ledger.c.checkpoint == checkpoint, _ledger.c.state == "waiting_final")
    return conn.execute(query).scalar()
