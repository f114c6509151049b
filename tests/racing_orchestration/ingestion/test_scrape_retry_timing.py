"""The morning scrape's real retry policy (30 min, at most 3 retries) asserted through the real job, the threadpool
executor and Dagster's own retry wait, on a fake clock: no config overrides the delay or the bound.

Dagster holds a step up for retry in `ActiveExecution` until `time.time()` passes `seconds_to_wait`, sleeping with
`time.sleep` when nothing else is in flight; the threadpool executor waits there too. The test swaps that module's
`time` for a fake clock whose `sleep` records the wait and moves the clock on, so 3 x 1800 s take no real time.
"""

import datetime as dt
import itertools
from collections import Counter

import dagster as dg
import pytest
import sqlalchemy as sa

from orchestration_core.run_outcome import (
    TAG_ITEMS_FAILED,
    TAG_ITEMS_PROCESSED,
    TAG_OUTCOME,
)
from orchestration_core.settings import racing_timezone
from racing_orchestration.ingestion.combinations import retries_when_empty, scrape_days
from racing_orchestration.ingestion.jobs import (
    COMBINATION_MAX_RETRIES,
    COMBINATION_RETRY_DELAY_SECONDS,
)
from tests.racing_orchestration.checkpoint_support import DagsterRetryClock
from tests.racing_orchestration.ingestion import scrape_faults
from tests.racing_orchestration.ingestion.scrape_faults import FEED


@pytest.fixture
def fake_retry_clock(monkeypatch) -> DagsterRetryClock:
    return DagsterRetryClock.install(monkeypatch)


@pytest.mark.unit
@pytest.mark.parametrize(
    ("day", "now_utc", "retried"),
    [
        # 06:00 NZDT on 29 Nov is 17:00 UTC on the 28th: the 29th is today, the 30th tomorrow.
        (dt.date(2026, 11, 29), dt.datetime(2026, 11, 28, 17, 0, tzinfo=dt.UTC), True),
        (dt.date(2026, 11, 30), dt.datetime(2026, 11, 28, 17, 0, tzinfo=dt.UTC), False),
        (dt.date(2026, 11, 28), dt.datetime(2026, 11, 28, 17, 0, tzinfo=dt.UTC), False),  # a backfilled past day
        (dt.date(2026, 7, 17), dt.datetime(2026, 7, 16, 18, 30, tzinfo=dt.UTC), True),  # NZST
    ],
)
def test_only_todays_empty_combinations_are_retried(day, now_utc, retried) -> None:
    assert retries_when_empty(day, now_utc, "Pacific/Auckland") is retried


@pytest.mark.integration
def test_default_policy_waits_1800_s_at_most_3_times_for_failed_and_empty_combinations(
        pg_instance, racing_db_url, sim_feed, fake_retry_clock) -> None:
    assert (COMBINATION_RETRY_DELAY_SECONDS, COMBINATION_MAX_RETRIES) == (1800, 3)
    today, tomorrow = (d.isoformat() for d in scrape_days(dt.datetime.now(dt.UTC), racing_timezone()))
    FEED.configure(
        base_url=sim_feed.base_url, database_url=racing_db_url, clock=fake_retry_clock.time,
        failing={("H", "AUS")},  # TAB down for AUS harness, both days
        empty={("G", "NZ", today): None, ("G", "NZ", tomorrow): None,  # no NZ greyhound racing at all
               ("H", "NZ", today): 2},  # NZ harness card published between the 2nd and 3rd attempt
    )
    job = dg.build_reconstructable_job(scrape_faults.__name__, "morning_scrape_with_faults")
    # No run config at all: the schedule's plan defaults, the op's retry defaults, the threadpool executor.
    with dg.execute_job(job, instance=pg_instance) as result:
        assert result.success
        results = {r.combination.key: r for r in result.output_for_node("scrape_combination").values()}
        run_id = result.run_id
    def compact(day: str) -> str:
        return day.replace("-", "")

    status = {key: (r.status, r.attempts) for key, r in results.items()}
    assert status[f"H_AUS_{compact(today)}"] == ("failed", 4)
    assert status[f"H_AUS_{compact(tomorrow)}"] == ("failed", 4)
    assert status[f"G_NZ_{compact(today)}"] == ("empty", 4)  # still empty after 3 retries: empty, not failed
    assert status[f"G_NZ_{compact(tomorrow)}"] == ("empty", 1)  # tomorrow's empty card is not retried
    assert status[f"H_NZ_{compact(today)}"][0] == "ok" and status[f"H_NZ_{compact(today)}"][1] == 3
    assert results[f"H_NZ_{compact(today)}"].races > 0
    assert sum(1 for s, _ in status.values() if s == "ok") == 12 - 4

    # Every wait was Dagster's, of exactly 1800 s on the fake clock, between consecutive attempts of a combination.
    assert fake_retry_clock.waits == [1800.0, 1800.0, 1800.0]
    for category, country, day, attempts in [("H", "AUS", today, 4), ("H", "AUS", tomorrow, 4),
                                             ("G", "NZ", today, 4), ("H", "NZ", today, 3), ("G", "NZ", tomorrow, 1)]:
        times = FEED.attempts(category, country, day)
        assert len(times) == attempts, (category, country, day)
        assert [b - a for a, b in itertools.pairwise(times)] == [1800.0] * (attempts - 1)
    events = [e for e in pg_instance.all_logs(run_id) if e.dagster_event is not None]
    retries = [e.dagster_event for e in events if e.dagster_event.event_type_value == "STEP_UP_FOR_RETRY"]
    assert Counter(e.step_key.split("[")[1].rstrip("]") for e in retries) == {
        f"H_AUS_{compact(today)}": 3, f"H_AUS_{compact(tomorrow)}": 3, f"G_NZ_{compact(today)}": 3,
        f"H_NZ_{compact(today)}": 2}
    assert {e.step_retry_data.seconds_to_wait for e in retries} == {1800}

    run = pg_instance.get_run_by_id(run_id)
    assert run.tags[TAG_OUTCOME] == "partial"
    assert (run.tags[TAG_ITEMS_PROCESSED], run.tags[TAG_ITEMS_FAILED]) == ("10", "2")
    # The cost of an empty combination retried for nothing (no racing that day): 3 calls, recorded like any other.
    with scrape_faults.RaceDatabase(url=racing_db_url).engine().connect() as conn:
        per_run = conn.execute(sa.text("SELECT count(*) FROM scrapes WHERE run_id = :r"), {"r": run_id}).scalar()
    assert per_run == len(FEED.requests) == 12 + 3 * 3 + 2
