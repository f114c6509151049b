"""Checkpoint runs' shared I/O: wait for the target instant, fetch one event with its API calls recorded, and keep the
ledger row current."""

from __future__ import annotations

import datetime as dt
import time
from collections.abc import Callable
from dataclasses import dataclass

import sqlalchemy as sa

from racing_orchestration.race_db.checkpoints import checkpoint_row, update_checkpoint
from racing_orchestration.race_db.api_calls import recorded_client
from racing_orchestration.race_db.resource import RaceDatabase
from racing_orchestration.tab.client import ApiCall, TabClient
from racing_orchestration.tab.models import Event
from racing_orchestration.checkpoints.windows import CheckpointSpec, Wait, holding_key, plan_wait

TAG_RACE_ID = "racing/race_id"  # dagster.yaml limits runs to one per value of this tag
TAG_MEETING_ID = "racing/meeting_id"
TAG_CHECKPOINT = "racing/checkpoint"
TAG_SCHEDULED_FOR = "racing/scheduled_for"
TAG_LATE = "racing/late"
TAG_TRIGGERED_BY = "racing/triggered_by"
TAG_PROVISIONAL = "racing/provisional"
TAG_ATTEMPT = "racing/attempt"  # post-race chain: 0 at T+5, then 1..3
TAG_PREVIOUS_RUN_ID = "racing/previous_run_id"  # the run of the chain's previous attempt
TAG_AWAITING_FINAL = "racing/awaiting_final"  # the run ended with the race not Final; the sensor requests the next
TAG_SUPERSEDED = "racing/superseded_by"  # the run key now holding the checkpoint, or the run that finished it
TAG_RESCHEDULED = "racing/rescheduled"  # the start moved while the run waited: handed back, due at this new time


def fetch_event(tab_client: TabClient, race_db: RaceDatabase, race_id: str, run_id: str) -> tuple[Event, list[ApiCall]]:
    """GET /events/{race_id}; the call is recorded in `scrapes` even when it fails (then the error propagates)."""
    with recorded_client(tab_client, race_db, run_id) as client:
        event = client.get_event(race_id)
    return event, list(client.calls)


def mark_ledger(race_db: RaceDatabase, race_id: str, checkpoint: str, state: str, run_id: str,
                note: str | None = None, *, manual: bool = False) -> None:
    """Record a sensor-claimed checkpoint's progress; manual re-fetches leave the sensor's ledger row alone."""
    if manual:
        return
    with race_db.begin() as conn:
        mark_ledger_in(conn, race_id, checkpoint, state, run_id, note, manual=manual)


def mark_ledger_in(conn: sa.Connection, race_id: str, checkpoint: str, state: str, run_id: str,
                   note: str | None = None, *, manual: bool = False) -> None:
    """`mark_ledger` inside the caller's transaction: what a run stores commits with its `done`, or neither does."""
    if not manual:
        update_checkpoint(conn, race_id, checkpoint, state=state, run_id=run_id, note=note)


# A checkpoint in one of these states has been taken (or given up with a reason): no run takes it again.
FINISHED_STATES = ("done", "abandoned", "skipped")


@dataclass(frozen=True)
class StandDown:
    """Why a run leaves the checkpoint alone: `holder` is the run key that now holds it or the run that finished it."""

    holder: str
    reason: str


def take_checkpoint(race_db: RaceDatabase, race_id: str, spec: CheckpointSpec, run_id: str,
                    key: str | None) -> StandDown | None:
    """Mark the claimed checkpoint `running` under `run_id`, a run requested under run key `key`; returns None, or
    why the run must leave it alone (and changes nothing).

    A checkpoint is taken by one run. Once the sensor has requested it again under a new key (its run failed, e.g.
    at start), a run of an older key must not take it too: Dagster's run retry of the failed run copies that run's
    key and can come minutes later on a loaded host (the re-request and the retry can come one second apart, both
    fetched). Nor is a finished checkpoint taken again: a run that committed its odds and its `done` can still fail
    to record its own success (Postgres went down), and Dagster's run retry of it carries the same key (left
    alone, the retry re-takes the row, and the ledger names a run whose odds are not the ones stored). A run
    without a key (not requested by a sensor) and a row not in the ledger are taken as before."""
    with race_db.begin() as conn:
        row = checkpoint_row(conn, race_id, spec.name, lock=True)
        if row is None:
            return None
        if row.state in FINISHED_STATES:
            return StandDown(row.run_id or "the sensor", f"already {row.state} by {row.run_id or 'the sensor'}")
        holder = holding_key(row.run_key, race_id, spec, row.attempt)
        if key is not None and key != holder:
            return StandDown(holder, f"requested again as {holder}: that run takes it")
        update_checkpoint(conn, race_id, spec.name, state="running", run_id=run_id)
    return None


class SystemClock:
    """The run's clock: what "now" is, and sleeping. The one seam tests replace (`fetch.CLOCK`) to check that a run
    fetches exactly at its target and never before."""

    def now(self) -> dt.datetime:
        return dt.datetime.now(dt.UTC)

    def sleep(self, seconds: float) -> None:
        time.sleep(seconds)


CLOCK = SystemClock()


def now_utc() -> dt.datetime:
    """The checkpoint jobs' clock (snapshot times, the post-race chain's next_attempt_at, the wait for the target);
    tests replace `CLOCK` (or `racing_orchestration.checkpoints.jobs.now_utc`) to run the real timings without waiting."""
    return CLOCK.now()


@dataclass(frozen=True)
class WaitResult:
    action: Wait  # FETCH or RESCHEDULE
    target: dt.datetime  # the last target read
    at: dt.datetime  # when the wait ended
    waited_seconds: float

    @property
    def lateness_seconds(self) -> float:
        """How long after its target the fetch starts (0 when the run was early enough to wait)."""
        return max(0.0, (self.at - self.target).total_seconds())


def wait_for_target(read_target: Callable[[], dt.datetime], requested_for: dt.datetime,
                    max_wait: dt.timedelta) -> WaitResult:
    """Sleep until `read_target()` (re-read after every sleep, so a start time that moved meanwhile moves the target),
    then return FETCH; RESCHEDULE instead of waiting beyond `max_wait` for a target that moved later than
    `requested_for` (windows.plan_wait). Never returns FETCH before the target by CLOCK."""
    started = CLOCK.now()
    while True:
        target, now = read_target(), CLOCK.now()
        plan = plan_wait(target, now, now - started, max_wait, requested_for)
        if plan.action != Wait.SLEEP:
            return WaitResult(plan.action, target, now, (now - started).total_seconds())
        CLOCK.sleep(plan.seconds)
