"""Checkpoint runs' shared I/O: fetch one event with its API calls recorded, and keep the ledger row current."""

from __future__ import annotations

import datetime as dt

from racing_orchestration.race_db.checkpoints import update_checkpoint
from racing_orchestration.race_db.api_calls import recorded_client
from racing_orchestration.race_db.resource import RaceDatabase
from racing_orchestration.tab.client import ApiCall, TabClient
from racing_orchestration.tab.models import Event

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
        update_checkpoint(conn, race_id, checkpoint, state=state, run_id=run_id, note=note)


def now_utc() -> dt.datetime:
    """The checkpoint jobs' clock (snapshot times, the post-race chain's next_attempt_at); tests replace
    `racing_orchestration.checkpoints.jobs.now_utc` to run the real 5/5/10-minute chain without waiting."""
    return dt.datetime.now(dt.UTC)
