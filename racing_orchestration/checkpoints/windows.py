"""Pure checkpoint timing: when each checkpoint of a race is due, and what a sensor does about it at `now`.

Launch ahead, fetch on time: a sensor requests a checkpoint `ahead` (RACING_CHECKPOINT_LAUNCH_AHEAD_SECONDS) before
its due time, so the run is queued and started by then; the run waits for the due time itself before calling TAB
(`plan_wait`), never earlier, and a run that starts after it fetches at once.

Policy for a checkpoint whose time has passed (the ledger then makes the decision final):
- within `GRACE` of its due time: requested on time;
- later than that (the daemon was down or behind): a pre-race checkpoint is still taken, flagged late, as long as the
  race has not started (odds after the jump are worthless); a post-race check is taken late for up to
  `POST_LATE_LIMIT` (results are still worth fetching) — otherwise it is skipped with a recorded reason;
- an abandoned race is skipped with the reason "race abandoned" (no T-15 after an abandonment seen at T-60, no
  post-race run).
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass
from enum import StrEnum

from racing_orchestration.tab.models import ABANDONED, CLOSED, FINAL, INTERIM, LIVE, status_is

# Sensor interval (the daemon's loop adds up to 5 s), and how late a request may be and still count as on time.
SENSOR_INTERVAL_SECONDS = 15
GRACE = dt.timedelta(minutes=2)
POST_LATE_LIMIT = dt.timedelta(hours=3)
# How far back the sensors look for unclaimed checkpoints, so an outage up to this long is recorded per race.
LOOKBACK = dt.timedelta(hours=24)


@dataclass(frozen=True)
class CheckpointSpec:
    name: str  # ledger / tag value: t60, t15, post
    job_name: str
    offset: dt.timedelta  # due time = start time + offset
    pre_race: bool

    @property
    def label(self) -> str:
        return {"t60": "T-60", "t15": "T-15", "post": "T+5"}[self.name]


CHECKPOINTS: dict[str, CheckpointSpec] = {
    spec.name: spec
    for spec in (
        CheckpointSpec("t60", "pre_race_t60", dt.timedelta(minutes=-60), True),
        CheckpointSpec("t15", "pre_race_t15", dt.timedelta(minutes=-15), True),
        CheckpointSpec("post", "post_race_t5", dt.timedelta(minutes=5), False),
    )
}


def checkpoint_spec(name: str) -> CheckpointSpec:
    """The spec of a checkpoint name, with an error listing the valid names."""
    try:
        return CHECKPOINTS[name]
    except KeyError:
        raise ValueError(f"unknown checkpoint {name!r}; choose one of {sorted(CHECKPOINTS)}") from None


def due_time(start: dt.datetime, spec: CheckpointSpec) -> dt.datetime:
    return start + spec.offset


def start_window(spec: CheckpointSpec, now: dt.datetime, lookback: dt.timedelta = LOOKBACK,
                 ahead: dt.timedelta = dt.timedelta(0)) -> tuple[dt.datetime, dt.datetime]:
    """Start times (lo, hi] whose checkpoint falls due in (now - lookback, now + ahead]: a range on the start_time
    index."""
    hi = now + ahead - spec.offset
    return hi - lookback, hi


# Race statuses after the jump: the market is no longer pre-race.
JUMPED = (CLOSED, LIVE, INTERIM, FINAL)


class Action(StrEnum):
    WAIT = "wait"  # not due yet (more than `ahead` away)
    REQUEST = "request"  # on time: within `ahead` before its due time, or at most GRACE after it
    REQUEST_LATE = "request_late"  # taken late, flagged
    SKIP = "skip"  # recorded as skipped, with a reason


@dataclass(frozen=True)
class Decision:
    action: Action
    lateness: dt.timedelta
    reason: str = ""

    @property
    def ledger_state(self) -> str:
        return {Action.REQUEST: "requested", Action.REQUEST_LATE: "requested_late", Action.SKIP: "skipped"}[self.action]


def _seconds(delta: dt.timedelta) -> str:
    return f"{delta.total_seconds():.0f} s"


def decide(
    spec: CheckpointSpec,
    start: dt.datetime,
    status: str | None,
    now: dt.datetime,
    *,
    grace: dt.timedelta = GRACE,
    post_late_limit: dt.timedelta = POST_LATE_LIMIT,
    ahead: dt.timedelta = dt.timedelta(0),
) -> Decision:
    """What to do about `spec` of a race starting at `start` (latest known) with `status`, at `now`; requested from
    `ahead` before its due time (lateness is then negative: the run waits for the due time)."""
    lateness = now - due_time(start, spec)
    if lateness < -ahead:
        return Decision(Action.WAIT, lateness)
    if status_is(status, ABANDONED):
        return Decision(Action.SKIP, lateness, "race abandoned")
    if spec.pre_race and (now >= start or status_is(status, *JUMPED)):
        return Decision(Action.SKIP, lateness,
                        f"missed by {_seconds(lateness)}: race already started (status {status}), odds no longer pre-race")
    if lateness <= grace:
        return Decision(Action.REQUEST, lateness)
    if not spec.pre_race and lateness > post_late_limit:
        return Decision(Action.SKIP, lateness,
                        f"missed by {_seconds(lateness)}: beyond the {_seconds(post_late_limit)} late limit")
    return Decision(Action.REQUEST_LATE, lateness, f"late by {_seconds(lateness)} (grace {_seconds(grace)})")


def no_longer_pre_race(spec: CheckpointSpec, status: str | None) -> str | None:
    """Why odds just fetched for `spec` must not be stored as its snapshot, or None when they may.

    The sensor requests a pre-race checkpoint only before the jump, but its run may start much later (queued behind
    a backlog, or held by a run whose worker died while Postgres was down). The race's status in the fetched event is
    the fresh word: once it is Closed, Live, Interim or Final the market is no longer pre-race, and storing it as the
    T-60 or T-15 would put in-running or settled prices into the movers and the export under a pre-race name. A race
    past its advertised start that is still Open has not jumped: its odds are still pre-race."""
    if spec.pre_race and status_is(status, *JUMPED):
        return f"the race had started when the run fetched (status {status}): odds no longer pre-race, not stored"
    return None


def run_key(race_id: str, spec: CheckpointSpec, attempt: int = 0) -> str:
    """`race:checkpoint`, and `race:post:n` for the post-race chain's follow-up attempt n."""
    return f"{race_id}:{spec.name}" if attempt == 0 else f"{race_id}:{spec.name}:{attempt}"


# A claimed checkpoint whose run failed, was canceled or never came is requested again at most this many times.
MAX_RELAUNCHES = 3
# Dagster run statuses of a run that may still take its checkpoint (leave it alone).
RUN_IN_PROGRESS = frozenset({"NOT_STARTED", "QUEUED", "STARTING", "STARTED", "MANAGED", "CANCELING"})


class Relaunch(StrEnum):
    WAIT = "wait"  # its run is queued or running
    SAME_KEY = "same_key"  # no run under the key (never launched, or deleted): the key is free, request it again
    NEW_KEY = "new_key"  # its run ended without taking it: the key is taken for good, request under the next one
    GIVE_UP = "give_up"  # too late or too often: the ledger row ends `failed` (`skipped` if the race was abandoned)


@dataclass(frozen=True)
class RelaunchDecision:
    action: Relaunch
    reason: str = ""
    ledger_state: str = ""  # the final state when giving up


def decide_relaunch(
    spec: CheckpointSpec,
    start: dt.datetime,
    status: str | None,
    now: dt.datetime,
    *,
    run_status: str | None,
    relaunches: int,
    launched: bool = False,
    max_relaunches: int = MAX_RELAUNCHES,
    grace: dt.timedelta = GRACE,
    post_late_limit: dt.timedelta = POST_LATE_LIMIT,
) -> RelaunchDecision:
    """A claimed checkpoint still `requested` (no run took it): what to do, given the newest run under its key.

    `run_status` is that run's Dagster status name, None when no run carries the key (`launched`: the ledger names a
    run that is gone). It is requested again while
    `decide` would still take it (pre-race: before the start; post-race: within the late limit), at most
    `max_relaunches` times; otherwise it ends with the reason.
    """
    if run_status in RUN_IN_PROGRESS:
        return RelaunchDecision(Relaunch.WAIT)
    if run_status is None:
        what = "its run vanished" if launched else "no run picked up the request"
    elif run_status == "SUCCESS":
        what = "its run succeeded without recording the checkpoint"
    else:
        what = f"its run ended {run_status} without taking the checkpoint"
    timing = decide(spec, start, status, now, grace=grace, post_late_limit=post_late_limit)
    if timing.action == Action.SKIP:
        state = "skipped" if status_is(status, ABANDONED) else "failed"
        return RelaunchDecision(Relaunch.GIVE_UP, f"{what}; not requested again: {timing.reason}", state)
    if run_status == "SUCCESS":  # nothing to retry, but the row must not stay `requested`
        return RelaunchDecision(Relaunch.GIVE_UP, f"{what}; not requested again", "failed")
    if relaunches >= max_relaunches:
        return RelaunchDecision(Relaunch.GIVE_UP, f"{what}; gave up after {relaunches} re-requests", "failed")
    action = Relaunch.SAME_KEY if run_status is None and not launched else Relaunch.NEW_KEY
    return RelaunchDecision(action, f"{what}; requested again ({relaunches + 1}/{max_relaunches})")


def retry_key(base_key: str, relaunch: int) -> str:
    """The run key of re-request `relaunch` (1..) of a checkpoint first requested under `base_key`."""
    return f"{base_key}:retry{relaunch}"


# --- the run's side: wait for the target instant, never fetch before it ------------------------------------------


def fetch_target(spec: CheckpointSpec, requested_for: dt.datetime, start: dt.datetime | None, attempt: int = 0) -> dt.datetime:
    """The instant a checkpoint run's /events request is due.

    Pre-race checkpoints and the post-race check at T+5 follow the race's latest start time (re-read by the run just
    before fetching: a start that moved since the sensor's request moves the target with it); a follow-up attempt of
    the post-race chain keeps the time it was requested for (the ledger's next_attempt_at, counted from the previous
    attempt, not from the start). Without a start time (race unknown) the requested time stands.
    """
    if attempt or start is None:
        return requested_for
    return due_time(start, spec)


# A run may wait this much longer than the margin it was requested with: hosts' clocks and the sensor tick's own
# duration differ by a few seconds, and a run should not give way over that.
WAIT_SLACK = dt.timedelta(seconds=10)


class Wait(StrEnum):
    FETCH = "fetch"  # the target has come (or passed: the run started late): call TAB now
    SLEEP = "sleep"  # the target is near: sleep until it, then look again
    RESCHEDULE = "reschedule"  # the target moved further than `max_wait` away: free the worker, the sensor re-requests


@dataclass(frozen=True)
class WaitPlan:
    action: Wait
    seconds: float  # SLEEP: how long; FETCH: the lateness (>= 0); RESCHEDULE: how far away the target is


def plan_wait(target: dt.datetime, now: dt.datetime, waited: dt.timedelta, max_wait: dt.timedelta,
              requested_for: dt.datetime) -> WaitPlan:
    """One step of a run's wait for `target` (it was requested for `requested_for`), having waited `waited` so far.

    Never early: FETCH only once `now >= target`. A run requested on time waits at most the margin it was requested
    with (`max_wait`). If its race's start moved so that the target is later than requested and further away than
    that, a fresh request at the new time arrives on time too, so the run gives its worker back (RESCHEDULE) instead
    of holding it. A target that did not move is always waited for, however far (the sensor requested it within the
    margin, so only a clock difference between hosts makes it longer): fetching early is never the answer.
    """
    remaining = (target - now).total_seconds()
    if remaining <= 0:
        return WaitPlan(Wait.FETCH, -remaining)
    if target > requested_for and waited + dt.timedelta(seconds=remaining) > max_wait:
        return WaitPlan(Wait.RESCHEDULE, remaining)
    return WaitPlan(Wait.SLEEP, remaining)


def rescheduled_key(race_id: str, spec: CheckpointSpec, target: dt.datetime) -> str:
    """Run key of a checkpoint requested again after its start moved: a new key (the first one is taken for good by
    the run that gave way), named by the new target so the same move seen twice is still one request."""
    return f"{run_key(race_id, spec)}:at{target.astimezone(dt.UTC):%Y%m%dT%H%M%SZ}"


def holding_key(latest_key: str | None, race_id: str, spec: CheckpointSpec, attempt: int) -> str:
    """The run key a claimed checkpoint is requested under now: the ledger's latest (a re-request's, a rescheduled
    claim's), else the claim's first key (`run_key`), which the ledger leaves empty."""
    return latest_key or run_key(race_id, spec, attempt)


def claim_base_key(latest_key: str | None, first_key: str) -> str:
    """The key re-requests of a claim count from (`<base>:retry<n>`): the claim's first key, i.e. the latest key
    without its retry suffix (a rescheduled claim starts from its `:at<time>` key)."""
    if not latest_key:
        return first_key
    return latest_key.partition(":retry")[0]
