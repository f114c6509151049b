"""`racing verify-checks`: every asset check's latest recorded result for a day against a fresh evaluation over the
race database; exit 0 when they match, 1 on a mismatch, its JSON the shape the soak bench reads. The morning scrape
runs in process on the instance `racing` reads ($DAGSTER_HOME on the session's Postgres), the feed on a socket."""

import datetime as dt
import json

import pytest

from racing_orchestration.cli import main
from racing_orchestration.cli.verify_checks import parse_day
from racing_orchestration.ingestion.jobs import morning_scrape
from racing_orchestration.race_data.recorded_checks import CHECK_KEYS, compare
from racing_orchestration.race_db.store import upsert_event
from tests.racing_orchestration.checkpoint_support import fetch_event

DAY = dt.date(2026, 11, 29)
NOON_NZ = dt.datetime(2026, 11, 28, 23, 0, tzinfo=dt.UTC)  # 12:00 on DAY in Pacific/Auckland
CARDS, RUNNERS, STARTS, PRE_RACE, RESULTS = CHECK_KEYS


@pytest.mark.unit
@pytest.mark.parametrize(("text", "day"), [
    (None, DAY),  # today in the racing timezone (UTC is still on the 28th)
    ("2026-11-01", dt.date(2026, 11, 1)),
])
def test_the_day_is_given_or_today_in_the_racing_timezone(text, day) -> None:
    assert parse_day(text, NOON_NZ, "Pacific/Auckland") == day


@pytest.mark.unit
@pytest.mark.parametrize("text", ["29/11/2026", "2026-02-30", "today"])
def test_a_day_that_is_not_a_date_is_refused_naming_the_form(text) -> None:
    with pytest.raises(ValueError, match=r"is not a date \(YYYY-MM-DD\)"):
        parse_day(text, NOON_NZ, "Pacific/Auckland")


@pytest.mark.unit
@pytest.mark.parametrize(("recorded", "fresh", "mismatches", "checked"), [
    ({RUNNERS: True}, {RUNNERS: True}, [], 1),
    ({RUNNERS: False}, {RUNNERS: True}, [("race_cards:races_have_runners", "failed", "passed")], 1),
    ({CARDS: True, PRE_RACE: False}, {CARDS: True, PRE_RACE: True},
     [("racing_day:pre_race_snapshots_complete", "failed", "passed")], 2),
    ({}, {RUNNERS: False}, [], 0),  # nothing recorded for the day: unrecorded, not a mismatch
])
def test_a_mismatch_is_a_recorded_outcome_the_data_no_longer_gives(recorded, fresh, mismatches, checked) -> None:
    everything_fresh = {key: True for key in CHECK_KEYS} | fresh
    verified = compare({key: recorded.get(key) for key in CHECK_KEYS}, everything_fresh, DAY)
    assert [(m.check, m.recorded, m.now) for m in verified.mismatches] == mismatches
    assert verified.checked == checked == len(CHECK_KEYS) - len(verified.unrecorded)
    assert all(m.partition == "2026-11-29" for m in verified.mismatches)


@pytest.mark.unit
def test_bad_input_exits_2_before_reading_anything(monkeypatch, capsys) -> None:
    nowhere = "postgresql+psycopg2://nobody:secret@127.0.0.1:9/none"
    monkeypatch.setenv("DAGSTER_HOME", "/nonexistent")
    monkeypatch.setenv("RACING_DATABASE_URL", nowhere)
    assert main(["verify-checks", "--day", "2026-13-01", "--json"]) == 2
    assert capsys.readouterr().err == "racing verify-checks: --day '2026-13-01' is not a date (YYYY-MM-DD)\n"


@pytest.mark.integration
def test_verify_checks_reports_none_then_the_mismatch_of_data_stored_without_recording(
        pg_instance, racing_db_url, race_db, tab_client, sim_feed, postgres_dagster_home, monkeypatch, capsys) -> None:
    monkeypatch.setenv("RACING_DATABASE_URL", racing_db_url)
    config = {"ops": {"plan_scrape_combinations": {"config": {"dates": [DAY.isoformat()], "countries": ["NZ"],
                                                              "categories": ["T"]}},
                      "scrape_combination": {"config": {"max_retries": 0}}}}
    assert morning_scrape.execute_in_process(run_config=config, instance=pg_instance,
                                             resources={"tab_client": tab_client, "race_db": race_db}).success

    # DAY has been raced and no checkpoint stored runners: races_have_runners failed, and still fails.
    assert main(["verify-checks", "--day", DAY.isoformat(), "--json"]) == 0
    assert json.loads(capsys.readouterr().out) == {"day": "2026-11-29", "checked": 3, "mismatches": []}

    # Every race's event stored outside any run (nothing records the checks again): the recorded failure is stale.
    with race_db.begin() as conn:
        for meeting in sim_feed.feed.day(DAY):
            if (meeting.country, meeting.category) == ("NZ", "T"):
                for race in meeting.races:
                    upsert_event(conn, fetch_event(sim_feed.feed, race.race_id))
    assert main(["verify-checks", "--day", DAY.isoformat(), "--json"]) == 1
    assert json.loads(capsys.readouterr().out) == {
        "day": "2026-11-29", "checked": 3,
        "mismatches": [{"check": "race_cards:races_have_runners", "partition": "2026-11-29", "recorded": "failed",
                        "now": "passed"}]}
    assert main(["verify-checks", "--day", DAY.isoformat()]) == 1
    out = capsys.readouterr().out
    assert out.startswith("2026-11-29: 3 recorded checks compared with the stored data\n")
    assert "nothing recorded for the day: racing_day:pre_race_snapshots_complete, racing_day:results_complete" in out
    assert "race_cards:races_have_runners  2026-11-29   failed      passed" in out


@pytest.mark.integration
def test_a_race_database_behind_the_code_exits_2_naming_the_upgrade(fresh_database_url, postgres_dagster_home,
                                                                   monkeypatch, capsys) -> None:
    monkeypatch.setenv("RACING_DATABASE_URL", fresh_database_url)  # never migrated
    assert main(["verify-checks", "--json"]) == 2
    captured = capsys.readouterr()
    assert captured.out == "" and captured.err.startswith("racing verify-checks: ")
    assert "racing db upgrade" in captured.err
