"""The runs that store cards record them in the asset catalog: the morning scrape and a card refresh materialize
`race_cards` for each racing day they stored (with what they stored) and evaluate the day's card checks, on a real
Dagster instance on Postgres, against the simulated feed on a socket."""

import datetime as dt

import dagster as dg
import pytest
import sqlalchemy as sa

from racing_orchestration.ingestion.card_refresh import card_refresh, card_refresh_run_config
from racing_orchestration.ingestion.jobs import morning_scrape
from racing_orchestration.race_db.store import upsert_event
from tests.racing_orchestration.checkpoint_support import fetch_event

DAY = dt.date(2026, 11, 29)
RACE_CARDS = dg.AssetKey("race_cards")
CHECKS = ("card_not_empty", "races_have_runners", "start_times_on_day")


def _scrape_config(days, countries=("NZ",)):
    return {"ops": {"plan_scrape_combinations": {"config": {"dates": [d.isoformat() for d in days],
                                                            "countries": list(countries)}},
                    "scrape_combination": {"config": {"max_retries": 0}}}}


def _card_records(instance: dg.DagsterInstance) -> list[dg.EventLogRecord]:
    return sorted(instance.fetch_materializations(RACE_CARDS, limit=100).records, key=lambda r: r.storage_id)


def _check_history(instance: dg.DagsterInstance, name: str, partition: str):
    key = dg.AssetCheckKey(RACE_CARDS, name)
    return [r for r in instance.event_log_storage.get_asset_check_execution_history(key, limit=20)
            if r.partition == partition]


@pytest.mark.integration
def test_the_morning_scrape_materializes_each_day_it_stored(pg_instance, race_db, tab_client) -> None:
    result = morning_scrape.execute_in_process(run_config=_scrape_config([DAY]), instance=pg_instance,
                                               resources={"tab_client": tab_client, "race_db": race_db})
    assert result.success
    [record] = _card_records(pg_instance)
    assert record.run_id == result.run_id and record.asset_materialization.partition == DAY.isoformat()
    meta = {k: v.value for k, v in record.asset_materialization.metadata.items()}
    with race_db.connect() as conn:
        meetings = conn.execute(sa.text("SELECT count(*) FROM meetings WHERE meeting_date = :d"), {"d": DAY}).scalar()
        races = conn.execute(sa.text("SELECT count(*) FROM races r JOIN meetings m USING (meeting_id) "
                                     "WHERE m.meeting_date = :d"), {"d": DAY}).scalar()
    assert meta["meetings"] == meetings > 0 and meta["races"] == races > 0
    assert (meta["ok_combinations"], meta["failed_combinations"], meta["api_requests"]) == (3, 0, 3)
    assert "| T | NZ |" in meta["combinations"]
    statuses = {}
    for name in CHECKS:
        [check] = _check_history(pg_instance, name, DAY.isoformat())
        assert check.run_id == result.run_id, name
        statuses[name] = check.status.value
    # DAY is past and no checkpoint stored its races' runners: the runners check says so, the others pass.
    assert statuses == {"card_not_empty": "SUCCEEDED", "start_times_on_day": "SUCCEEDED",
                        "races_have_runners": "FAILED"}
    [runners] = _check_history(pg_instance, "races_have_runners", DAY.isoformat())
    assert "races past T-60 have no runners" in runners.event.dagster_event.event_specific_data.description


@pytest.mark.integration
def test_a_card_refresh_materializes_the_day_and_checks_runners_of_races_past_t60(pg_instance, race_db,
                                                                                 tab_client, sim_feed) -> None:
    morning_scrape.execute_in_process(run_config=_scrape_config([DAY], countries=("NZ", "AUS")), instance=pg_instance,
                                      resources={"tab_client": tab_client, "race_db": race_db})
    with race_db.begin() as conn:  # what the T-60 runs store: each race's event with its runners
        for meeting in sim_feed.feed.day(DAY):
            if meeting.country in ("NZ", "AUS"):
                for race in meeting.races:
                    upsert_event(conn, fetch_event(sim_feed.feed, race.race_id))
    result = card_refresh.execute_in_process(run_config=card_refresh_run_config(DAY), instance=pg_instance,
                                             resources={"tab_client": tab_client, "race_db": race_db})
    assert result.success
    record = _card_records(pg_instance)[-1]
    assert (record.run_id, record.asset_materialization.partition) == (result.run_id, DAY.isoformat())
    assert record.asset_materialization.metadata["ok_combinations"].value == 6  # T, H, G x NZ, AUS
    for name in CHECKS:
        latest = _check_history(pg_instance, name, DAY.isoformat())[0]
        assert (latest.run_id, latest.status.value) == (result.run_id, "SUCCEEDED"), name


@pytest.mark.integration
def test_a_day_that_stays_empty_is_checked_not_materialized(pg_instance, race_db, tab_client, sim_feed) -> None:
    sim_feed.feed.config.history_days = 30  # the feed refuses days before a month ago: nothing to store
    gone = DAY - dt.timedelta(days=400)
    result = morning_scrape.execute_in_process(run_config=_scrape_config([gone, DAY]), instance=pg_instance,
                                               resources={"tab_client": tab_client, "race_db": race_db},
                                               raise_on_error=False)
    assert [r.asset_materialization.partition for r in _card_records(pg_instance)] == [DAY.isoformat()]
    [empty] = _check_history(pg_instance, "card_not_empty", gone.isoformat())
    assert empty.status.value == "FAILED" and empty.run_id == result.run_id
    run = pg_instance.get_run_by_id(result.run_id)
    assert run.tags["racing/outcome"] == "partial"  # the morning scrape's own outcome rule is unchanged
