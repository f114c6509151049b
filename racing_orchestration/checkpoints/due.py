"""One sensor tick's database work: find unclaimed checkpoints that fall due within the launch-ahead margin and claim
them in the ledger.

The post-race sensor also claims due follow-up attempts of races still waiting for Final, and every sensor picks up
rows it claimed earlier that no run has picked up (a daemon crash between claim and launch).
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable
from dataclasses import dataclass, field, replace

import sqlalchemy as sa

from racing_orchestration.checkpoints.windows import (
    LOOKBACK,
    Action,
    CheckpointSpec,
    Decision,
    Relaunch,
    claim_base_key,
    decide,
    decide_relaunch,
    due_time,
    rescheduled_key,
    retry_key,
    run_key,
    start_window,
)
from racing_orchestration.race_db import schema
from racing_orchestration.race_db.checkpoints import (
    RESCHEDULED,
    claim_checkpoint,
    claim_due_attempts,
    give_up_checkpoint,
    next_attempt_due,
    reclaim_unlaunched,
    record_relaunch,
)

# Bounds one tick's work after a long outage; the rest is picked up by the next ticks.
MAX_PER_TICK = 200
# A claimed row that no run has taken this long after its request is looked at again: requested again under the same
# run key if no run carries it, under `<key>:retry<n>` if its run failed or was canceled (Dagster's run-key dedupe
# blocks a key for good once any run has it), at most MAX_RELAUNCHES times and only while `decide` would still take
# it; otherwise the row ends failed (or skipped) with the reason.
LAUNCH_GAP = dt.timedelta(minutes=2)

# The status name of the run `run_id` if given, else of the newest Dagster run carrying the key; None when none.
RunStatusLookup = Callable[[str, "str | None"], "str | None"]

_races, _ledger = schema.races, schema.race_checkpoints


@dataclass(frozen=True)
class DueCheckpoint:
    race_id: str
    meeting_id: str
    scheduled_for: dt.datetime
    decision: Decision
    attempt: int = 0  # post-race chain: 0 at T+5, then 1..3
    previous_run_id: str | None = None
    relaunch: bool = False  # requested before; no run took it
    run_key: str | None = None  # set on re-requests (the first request's key comes from windows.run_key)


@dataclass
class TickPlan:
    requests: list[DueCheckpoint] = field(default_factory=list)
    skipped: list[DueCheckpoint] = field(default_factory=list)
    failed: list[DueCheckpoint] = field(default_factory=list)  # requested, no run took it, not requested again
    next_due: dt.datetime | None = None
    window: tuple[dt.datetime, dt.datetime] | None = None


def unclaimed_due_races(
    conn: sa.Connection, spec: CheckpointSpec, now: dt.datetime, lookback: dt.timedelta = LOOKBACK, limit: int = MAX_PER_TICK,
    ahead: dt.timedelta = dt.timedelta(0),
) -> list[sa.Row]:
    """Races whose checkpoint falls due in (now - lookback, now + ahead] and is not claimed in the ledger (index range
    + anti-join; a row a run gave back as `rescheduled` counts as unclaimed, flagged in `rescheduled`)."""
    lo, hi = start_window(spec, now, lookback, ahead)
    claimed = sa.exists().where(_ledger.c.race_id == _races.c.race_id, _ledger.c.checkpoint == spec.name,
                                _ledger.c.state != RESCHEDULED)
    rescheduled = sa.exists().where(_ledger.c.race_id == _races.c.race_id, _ledger.c.checkpoint == spec.name,
                                    _ledger.c.state == RESCHEDULED)
    query = (
        sa.select(_races.c.race_id, _races.c.meeting_id, _races.c.start_time, _races.c.status,
                  rescheduled.label("rescheduled"))
        .where(_races.c.start_time > lo, _races.c.start_time <= hi, ~claimed)
        .order_by(_races.c.start_time, _races.c.race_id)
        .limit(limit)
    )
    return list(conn.execute(query))


def next_start_after(conn: sa.Connection, moment: dt.datetime) -> dt.datetime | None:
    return conn.execute(sa.select(sa.func.min(_races.c.start_time)).where(_races.c.start_time > moment)).scalar()


def plan_tick(conn: sa.Connection, spec: CheckpointSpec, now: dt.datetime, lookback: dt.timedelta = LOOKBACK,
              run_status: RunStatusLookup | None = None, ahead: dt.timedelta = dt.timedelta(0)) -> TickPlan:
    """Decide every unclaimed checkpoint due by `now + ahead` and claim it (ON CONFLICT DO NOTHING, or taking over a
    `rescheduled` row): only won claims are returned. Requests made before the due time carry it as their target;
    the run waits for it.

    Claimed rows no run has taken are decided by `decide_relaunch` with `run_status` of their latest run key (no
    lookup: treated as never launched).

    Run inside a transaction: claims commit together with the decision, so a crashed tick claims nothing.
    """
    plan = TickPlan(window=start_window(spec, now, lookback, ahead))
    for row in unclaimed_due_races(conn, spec, now, lookback, ahead=ahead):
        decision = decide(spec, row.start_time, row.status, now, ahead=ahead)
        if decision.action == Action.WAIT:  # cannot happen inside the window; kept for safety
            continue
        scheduled = due_time(row.start_time, spec)
        # Requested again after its run gave way to a moved start: the first key is taken for good.
        key = rescheduled_key(row.race_id, spec, scheduled) if row.rescheduled else None
        if not claim_checkpoint(conn, row.race_id, spec.name, scheduled, state=decision.ledger_state,
                                note=decision.reason or None, requested_at=now, run_key=key):
            continue  # another tick (or sensor process) claimed it first
        due = DueCheckpoint(row.race_id, row.meeting_id, scheduled, decision, run_key=key)
        (plan.skipped if decision.action == Action.SKIP else plan.requests).append(due)
    if not spec.pre_race:
        for row in claim_due_attempts(conn, spec.name, now, ahead=ahead):
            decision = Decision(Action.REQUEST, now - row.due_at)
            plan.requests.append(DueCheckpoint(row.race_id, "", row.due_at, decision, row.attempt, row.previous_run_id))
    for row in reclaim_unlaunched(conn, spec.name, now, stale_after=LAUNCH_GAP):
        first_key = claim_base_key(row.run_key, run_key(row.race_id, spec, row.attempt))
        key = row.run_key or first_key
        # A follow-up attempt's target is its next_attempt_at (kept on the row), not the T+5 time.
        target = row.next_attempt_at if row.attempt and row.next_attempt_at is not None else row.scheduled_for
        status = run_status(key, row.run_id) if run_status is not None else None
        relaunch = decide_relaunch(spec, row.start_time, row.status, now, run_status=status, relaunches=row.relaunches,
                                   launched=row.run_id is not None)
        if relaunch.action == Relaunch.WAIT:
            continue
        action = Action.REQUEST_LATE if row.state == "requested_late" else Action.REQUEST
        state = "requested_late" if row.state == "requested_late" else "requested"
        if relaunch.action == Relaunch.GIVE_UP:
            give_up_checkpoint(conn, row.race_id, spec.name, state=relaunch.ledger_state, note=f"{key}: {relaunch.reason}",
                               run_id=row.run_id)
            decision = Decision(Action.SKIP, now - target, f"{key}: {relaunch.reason}")
            plan.failed.append(DueCheckpoint(row.race_id, "", target, decision, row.attempt, run_key=key))
            continue
        if relaunch.action == Relaunch.NEW_KEY:
            key = retry_key(first_key, row.relaunches + 1)
        note = f"{relaunch.reason} as {key}"
        record_relaunch(conn, row.race_id, spec.name, run_key=key, note=note, now=now, run_id=row.run_id, state=state)
        decision = Decision(action, now - target, note)
        plan.requests.append(DueCheckpoint(row.race_id, "", target, decision, row.attempt,
                                           row.previous_run_id, relaunch=True, run_key=key))
    _fill_meetings(conn, plan)
    if not plan.requests:
        candidates = [following for following in [next_start_after(conn, plan.window[1])] if following is not None]
        candidates = [due_time(start, spec) for start in candidates]
        if not spec.pre_race and (pending := next_attempt_due(conn, spec.name)) is not None:
            candidates.append(pending)
        plan.next_due = min(candidates) if candidates else None
    return plan


def _fill_meetings(conn: sa.Connection, plan: TickPlan) -> None:
    missing = {due.race_id for due in plan.requests if not due.meeting_id}
    if not missing:
        return
    meetings = dict(conn.execute(sa.select(_races.c.race_id, _races.c.meeting_id).where(_races.c.race_id.in_(missing))).all())
    plan.requests = [due if due.meeting_id else replace(due, meeting_id=meetings.get(due.race_id, ""))
                     for due in plan.requests]
