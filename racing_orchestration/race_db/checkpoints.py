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
) -> bool:
    """Record that `checkpoint` of `race_id` is being requested; False if it was already claimed (do not request)."""
    require_aware(scheduled_for, "scheduled_for")
    stmt = (
        pg_insert(_ledger)
        .values(race_id=race_id, checkpoint=checkpoint, scheduled_for=scheduled_for, state=state, note=note)
        .on_conflict_do_nothing(index_elements=["race_id", "checkpoint"])
        .returning(_ledger.c.race_id)
    )
    return conn.execute(stmt).first() is not None


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


def checkpoint_row(conn: sa.Connection, race_id: str, checkpoint: str) -> sa.Row | None:
    query = sa.select(_ledger).where(_ledger.c.race_id == race_id, _ledger.c.checkpoint == checkpoint)
    return conn.execute(query).first()
