"""The day's `race_cards` materializations while combinations store concurrently (the morning scrape's threads): the
latest one always shows what the race database held last, whichever combination read its counts first.

Real Postgres and the simulated feed on a socket; the step context is a stand-in that records what would be logged
(only `log_event` is used), so the test can hold one combination between reading the day and logging it.
"""

from __future__ import annotations

import datetime as dt
import threading

import dagster as dg
import pytest

from orchestration_core.settings import racing_timezone
from racing_orchestration.ingestion.card_days import record_stored_combination
from racing_orchestration.ingestion.combinations import ScrapeCombination, scrape_days
from racing_orchestration.ingestion.scrape import scrape_combination_once

pytestmark = pytest.mark.integration


class SlowFirstLogContext:
    """Records logged events; the first `log_event` call waits (at most `hold_seconds`) for another call to log."""

    def __init__(self, hold_seconds: float) -> None:
        self.events: list = []
        self.first_is_waiting = threading.Event()
        self.another_logged = threading.Event()
        self.hold_seconds = hold_seconds
        self._lock = threading.Lock()
        self._calls = 0

    def log_event(self, event) -> None:
        with self._lock:
            self._calls += 1
            first = self._calls == 1
        if first:
            self.first_is_waiting.set()
            self.another_logged.wait(self.hold_seconds)
        else:
            self.another_logged.set()
        with self._lock:
            self.events.append(event)


def test_the_latest_card_materialization_has_the_last_counts_read(race_db, tab_client) -> None:
    today = scrape_days(dt.datetime.now(dt.UTC), racing_timezone(), days_ahead=0)[0]
    trots, harness = ScrapeCombination("T", "NZ", today), ScrapeCombination("H", "NZ", today)
    context = SlowFirstLogContext(hold_seconds=1.0)

    stored_trots = scrape_combination_once(tab_client, race_db, trots, "run-1")
    assert stored_trots.meetings > 0
    first = threading.Thread(target=record_stored_combination, args=(context, stored_trots, race_db))
    first.start()
    assert context.first_is_waiting.wait(10)
    # T/NZ has read the day and is about to log it; H/NZ stores its meetings and records the day meanwhile.
    stored_harness = scrape_combination_once(tab_client, race_db, harness, "run-1")
    assert stored_harness.meetings > 0
    second = threading.Thread(target=record_stored_combination, args=(context, stored_harness, race_db))
    second.start()
    first.join(10)
    second.join(10)

    cards = [e for e in context.events if isinstance(e, dg.AssetMaterialization)]
    assert [c.metadata["combination"].value for c in cards] == [trots.key, harness.key]
    assert cards[-1].metadata["meetings"].value == stored_trots.meetings + stored_harness.meetings
