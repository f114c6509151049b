"""The catalog shows what is stored as it is stored: while one combination of the morning scrape waits 30 minutes for
its retry, the day's `race_cards` partition is already materialized (and checked) with what the race database holds,
and again as the retried combination completes; the summary step still records the day's full card, its checks and
the run's outcome tags last.

The real `morning_scrape` job (threadpool executor, launched with execute_job) against the simulated feed on a socket,
real Postgres, the real 30-minute retry delay on Dagster's faked retry clock: the moment Dagster waits for the retry
(nothing else in flight, the run not ended) is when the test reads the instance, through its public API.
"""

from __future__ import annotations

import datetime as dt

import dagster as dg
import pytest
import sqlalchemy as sa

from orchestration_core.run_outcome import TAG_ITEMS_FAILED, TAG_ITEMS_PROCESSED, TAG_OUTCOME
from orchestration_core.settings import racing_timezone
from racing_orchestration.ingestion.combinations import scrape_days
from racing_orchestration.race_data.card_checks import (
    CARD_NOT_EMPTY,
    CardCheck,
    RACES_HAVE_RUNNERS,
    START_TIMES_ON_DAY,
    checks_while_scraping,
)
from tests.racing_orchestration.checkpoint_support import DagsterRetryClock
from tests.racing_orchestration.ingestion import scrape_faults
from tests.racing_orchestration.ingestion.scrape_faults import FEED

RACE_CARDS = dg.AssetKey("race_cards")
CHECKS = (CARD_NOT_EMPTY, RACES_HAVE_RUNNERS, START_TIMES_ON_DAY)


class CatalogWatchingClock(DagsterRetryClock):
    """Dagster's retry clock, faked, that reads the catalog each time the run waits for a step's retry."""

    instance: dg.DagsterInstance
    database_url: str
    day: dt.date

    def sleep(self, seconds: float) -> None:
        self.seen.append(catalog_view(self.instance, self.database_url, self.day))
        super().sleep(seconds)


def stored_counts(database_url: str, day: dt.date) -> tuple[int, int]:
    with scrape_faults.RaceDatabase(url=database_url).engine().connect() as conn:
        return conn.execute(sa.text(
            "SELECT (SELECT count(*) FROM meetings WHERE meeting_date = :d), "
            "(SELECT count(*) FROM races JOIN meetings USING (meeting_id) WHERE meeting_date = :d)"), {"d": day}).one()


def card_records(instance: dg.DagsterInstance, day: dt.date) -> list[dg.EventLogRecord]:
    records = instance.fetch_materializations(
        dg.AssetRecordsFilter(asset_key=RACE_CARDS, asset_partitions=[day.isoformat()]), limit=100).records
    return sorted(records, key=lambda r: r.storage_id)


def check_records(instance: dg.DagsterInstance, name: str, day: dt.date) -> list:
    history = instance.event_log_storage.get_asset_check_execution_history(dg.AssetCheckKey(RACE_CARDS, name),
                                                                          limit=50)
    return [r for r in history if r.partition == day.isoformat()]  # newest first


def catalog_view(instance: dg.DagsterInstance, database_url: str, day: dt.date) -> dict:
    latest = instance.get_latest_materialization_event(RACE_CARDS)
    runs = instance.get_runs()
    return {
        "run_status": runs[0].status if runs else None,
        "stored": stored_counts(database_url, day),
        "materializations": len(card_records(instance, day)),
        "latest": latest.asset_materialization if latest else None,
        "latest_step": latest.step_key if latest else None,
        # Dagster keeps one execution record per run and check: its latest evaluation (status and step).
        "checks": {name: [(r.status.value, r.event.step_key.split("[")[0]) for r in check_records(instance, name, day)]
                   for name in CHECKS},
    }


@pytest.fixture
def watching_clock(monkeypatch) -> CatalogWatchingClock:
    clock = CatalogWatchingClock.install(monkeypatch)
    clock.seen = []
    return clock


@pytest.mark.integration
def test_the_days_cards_are_in_the_catalog_while_a_combination_waits_for_its_retry(
        pg_instance, racing_db_url, sim_feed, watching_clock) -> None:
    today = scrape_days(dt.datetime.now(dt.UTC), racing_timezone(), days_ahead=0)[0]
    watching_clock.instance, watching_clock.database_url, watching_clock.day = pg_instance, racing_db_url, today
    # NZ greyhounds' card is published between the 2nd and the 3rd attempt: two 30-minute waits, T and H stored.
    FEED.configure(base_url=sim_feed.base_url, database_url=racing_db_url, clock=watching_clock.time,
                   empty={("G", "NZ", today.isoformat()): 2})
    job = dg.build_reconstructable_job(scrape_faults.__name__, "morning_scrape_with_faults")
    run_config = {"ops": {"plan_scrape_combinations": {"config": {"dates": [today.isoformat()],
                                                                   "countries": ["NZ"]}}}}
    with dg.execute_job(job, instance=pg_instance, run_config=run_config) as result:
        assert result.success
        run_id = result.run_id
    assert watching_clock.waits == [1800.0, 1800.0]

    # While the run waits for G/NZ's retry, the day is materialized with what the race database holds, and checked.
    first_wait = watching_clock.seen[0]
    assert first_wait["run_status"] == dg.DagsterRunStatus.STARTED
    assert first_wait["latest"] is not None, "race_cards has no materialization while a combination is retrying"
    latest = first_wait["latest"]
    assert latest.partition == today.isoformat() and first_wait["latest_step"].startswith("scrape_combination[")
    meetings, races = first_wait["stored"]
    assert meetings > 0 and races > 0
    assert (latest.metadata["meetings"].value, latest.metadata["races"].value) == (meetings, races)
    assert first_wait["materializations"] == 2  # T/NZ and H/NZ, each as it stored its meetings
    assert first_wait["checks"][CARD_NOT_EMPTY] == [("SUCCEEDED", "scrape_combination")]
    assert first_wait["checks"][START_TIMES_ON_DAY] == [("SUCCEEDED", "scrape_combination")]
    assert [step for _, step in first_wait["checks"][RACES_HAVE_RUNNERS]] == ["scrape_combination"]

    # After the run: once more as G/NZ stored its card, then the summary's full card and checks, last.
    records = card_records(pg_instance, today)
    assert [r.event_log_entry.step_key.split("[")[0] for r in records] == ["scrape_combination"] * 3 + [
        "summarize_scrape"]
    assert all(r.run_id == run_id for r in records)
    final = {k: v.value for k, v in records[-1].asset_materialization.metadata.items()}
    assert (final["meetings"], final["races"]) == stored_counts(racing_db_url, today)
    assert (final["ok_combinations"], final["empty_combinations"], final["failed_combinations"]) == (3, 0, 0)
    assert records[-2].asset_materialization.metadata["meetings"].value == final["meetings"]
    assert pg_instance.get_latest_materialization_event(RACE_CARDS).step_key == "summarize_scrape"
    for name in CHECKS:
        [check] = check_records(pg_instance, name, today)
        assert (check.run_id, check.event.step_key) == (run_id, "summarize_scrape"), name
    assert check_records(pg_instance, CARD_NOT_EMPTY, today)[0].status.value == "SUCCEEDED"
    run = pg_instance.get_run_by_id(run_id)
    assert (run.tags[TAG_OUTCOME], run.tags[TAG_ITEMS_PROCESSED], run.tags[TAG_ITEMS_FAILED]) == ("success", "3", "0")


@pytest.mark.unit
@pytest.mark.parametrize(
    ("name", "passed", "kept"),
    [
        (CARD_NOT_EMPTY, True, True),
        # Meetings stored without races yet: other combinations may still store some; the summary step decides.
        (CARD_NOT_EMPTY, False, False),
        (RACES_HAVE_RUNNERS, False, True),  # about what is stored: true as soon as it is stored
        (START_TIMES_ON_DAY, False, True),
    ],
)
def test_only_a_failed_completeness_check_waits_for_the_end_of_the_scrape(name, passed, kept) -> None:
    check = CardCheck(name, passed, "", {})
    assert checks_while_scraping([check]) == ([check] if kept else [])
