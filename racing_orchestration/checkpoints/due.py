"""One sensor tick's database work: find unclaimed checkpoints that fell due and claim them in the ledger."""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass, field

import sqlalchemy as sa

from racing_orchestration.checkpoints.windows import (
    LOOKBACK,
    Action,
    CheckpointSpec,
    Decision,
    decide,
    due_time,
    start_window,
)
from racing_orchestration.race_db import schema
from racing_orchestration.race_db.checkpoints import claim_checkpoint

# Bounds one tick's work after a long outage; the rest is picked up by the next ticks.
MAX_PER_TICK = 200

_races, _ledger = schema.races, schema.race_checkpoints


@dataclass(frozen=True)
class DueCheckpoint:
    race_id: str
    meeting_id: str
    scheduled_for: dt.datetime
    decision: Decision


@dataclass
class TickPlan:
    requests: list[DueCheckpoint] = field(default_factory=list)
    skipped: list[DueCheckpoint] = field(default_factory=list)
    next_due: dt.datetime | None = None
    window: tuple[dt.datetime, dt.datetime] | None = None


def unclaimed_due_races(
    conn: sa.Connection, spec: CheckpointSpec, now: dt.datetime, lookback: dt.timedelta = LOOKBACK, limit: int = MAX_PER_TICK
) -> list[sa.Row]:
    """Races whose checkpoint fell due in (now - lookback, now] and is not in the ledger (index range + anti-join)."""
    lo, hi = start_window(spec, now, lookback)
    claimed = sa.exists().where(_ledger.c.race_id == _races.c.race_id, _ledger.c.checkpoint == spec.name)
    query = (
        sa.select(_races.c.race_id, _races.c.meeting_id, _races.c.start_time, _races.c.status)
        .where(_races.c.start_time > lo, _races.c.start_time <= hi, ~claimed)
        .order_by(_races.c.start_time, _races.c.race_id)
        .limit(limit)
    )
    return list(conn.execute(query))


def next_start_after(conn: sa.Connection, moment: dt.datetime) -> dt.datetime | None:
    return conn.execute(sa.select(sa.func.min(_races.c.start_time)).where(_races.c.start_time > moment)).scalar()


def plan_tick(conn: sa.Connection, spec: CheckpointSpec, now: dt.datetime, lookback: dt.timedelta = LOOKBACK) -> TickPlan:
    """Decide every unclaimed due checkpoint and claim it (ON CONFLICT DO NOTHING): only won claims are returned.

    Run inside a transaction: claims commit together with the decision, so a crashed tick claims nothing.
    """
    plan = TickPlan(window=start_window(spec, now, lookback))
    for row in unclaimed_due_races(conn, spec, now, lookback):
        decision = decide(spec, row.start_time, row.status, now)
        if decision.action == Action.WAIT:  # cannot happen inside the window; kept for safety
            continue
        scheduled = due_time(row.start_time, spec)
        if not claim_checkpoint(conn, row.race_id, spec.name, scheduled, state=decision.ledger_state,
                                note=decision.reason or None):
            continue  # another tick (or sensor process) claimed it first
        due = DueCheckpoint(row.race_id, row.meeting_id, scheduled, decision)
        (plan.skipped if decision.action == Action.SKIP else plan.requests).append(due)
    if not plan.requests:
        following = next_start_after(conn, plan.window[1])
        plan.next_due = due_time(following, spec) if following is not None else None
    return plan
