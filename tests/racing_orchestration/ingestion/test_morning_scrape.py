import datetime as dt

import dagster as dg
import httpx
import pytest
import sqlalchemy as sa

from racing_orchestration.ingestion.jobs import morning_scrape, morning_scrape_run_config, morning_scrape_schedule
from orchestration_core.run_outcome import TAG_ITEMS_FAILED, TAG_ITEMS_PROCESSED, TAG_OUTCOME
from racing_orchestration.tab.client import TabClient

DAY = dt.date(2026, 11, 29)


def _run_config(days, *, countries=("NZ", "AUS"), max_retries=3, delay=0.05):
    return {
        "ops": {
            "plan_scrape_combinations": {"config": {"dates": [d.isoformat() for d in days], "countries": list(countries)}},
            "scrape_combination": {"config": {"max_retries": max_retries, "retry_delay_seconds": delay}},
        }
    }


def _counts(race_db) -> dict[str, int]:
    with race_db.connect() as conn:
        return {t: conn.execute(sa.text(f"SELECT count(*) FROM {t}")).scalar() for t in ("meetings", "races", "scrapes")}


class FailCountry(httpx.BaseTransport):
    """Real HTTP to the simulated feed, except a 503 for one country: the outside world failing, at the seam."""

    def __init__(self, country: str) -> None:
        self.country = country
        self.inner = httpx.HTTPTransport()

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        if request.url.params.get("country") == self.country:
            return httpx.Response(503, json={"header": {"error": "unavailable"}}, request=request)
        return self.inner.handle_request(request)


class AusDownTabClient(TabClient):
    """The production client whose transport fails AUS requests (Dagster re-creates resources from their class)."""

    def model_post_init(self, context) -> None:
        super().model_post_init(context)
        self._transport = FailCountry("AUS")


class NzDownTabClient(TabClient):
    def model_post_init(self, context) -> None:
        super().model_post_init(context)
        self._transport = FailCountry("NZ")


@pytest.mark.integration
def test_morning_scrape_stores_races_and_tags_the_run(pg_instance, race_db, tab_client, sim_feed) -> None:
    days = [DAY, DAY + dt.timedelta(days=1)]
    result = morning_scrape.execute_in_process(
        run_config=_run_config(days), instance=pg_instance, resources={"tab_client": tab_client, "race_db": race_db}
    )
    assert result.success
    counts = _counts(race_db)
    assert counts["meetings"] > 0 and counts["races"] >= 6 * counts["meetings"]
    run = pg_instance.get_run_by_id(result.run_id)
    assert run.tags[TAG_OUTCOME] == "success"
    assert run.tags[TAG_ITEMS_PROCESSED] == "12"  # 3 categories x 2 countries x 2 days
    assert run.tags[TAG_ITEMS_FAILED] == "0"
    summary = result.output_for_node("summarize_scrape")
    assert summary["races"] == counts["races"] and summary["combinations"] == 12
    assert summary["api_requests"] == counts["scrapes"] == sim_feed.stats()["total"]
    with race_db.connect() as conn:
        run_ids = conn.execute(sa.text("SELECT DISTINCT run_id FROM scrapes")).scalars().all()
        starts = conn.execute(sa.text("SELECT min(start_time), max(start_time) FROM races")).one()
    assert run_ids == [result.run_id]
    assert starts[0].tzinfo is not None

    # Scraping the same day again changes nothing in meetings and races.
    again = morning_scrape.execute_in_process(
        run_config=_run_config(days), instance=pg_instance, resources={"tab_client": tab_client, "race_db": race_db}
    )
    assert again.success
    after = _counts(race_db)
    assert (after["meetings"], after["races"]) == (counts["meetings"], counts["races"])


@pytest.mark.integration
def test_failed_combinations_retry_then_end_partial(pg_instance, race_db, sim_feed) -> None:
    client = AusDownTabClient(base_url=sim_feed.base_url, retry_backoff_seconds=0.01, max_attempts=1)
    result = morning_scrape.execute_in_process(
        run_config=_run_config([DAY], max_retries=2),
        instance=pg_instance,
        resources={"tab_client": client, "race_db": race_db},
    )
    assert result.success  # partial is a successful run whose items partly failed
    run = pg_instance.get_run_by_id(result.run_id)
    assert run.tags[TAG_OUTCOME] == "partial"
    assert (run.tags[TAG_ITEMS_PROCESSED], run.tags[TAG_ITEMS_FAILED]) == ("3", "3")
    assert "AUS" in run.tags["racing/error"]
    retries = [e for e in result.all_events if e.event_type_value == "STEP_UP_FOR_RETRY"]
    # Only the three AUS combinations are retried, twice each.
    assert len(retries) == 3 * 2
    assert all("AUS" in e.step_key for e in retries)
    with race_db.connect() as conn:
        failed_calls = conn.execute(sa.text("SELECT count(*) FROM scrapes WHERE outcome = 'error'")).scalar()
    assert failed_calls == 3 * 3  # every attempt's API call is in the scrapes table


@pytest.mark.integration
def test_every_combination_failing_fails_the_run(pg_instance, race_db, sim_feed) -> None:
    client = NzDownTabClient(base_url=sim_feed.base_url, max_attempts=1)
    result = morning_scrape.execute_in_process(
        run_config=_run_config([DAY], countries=["NZ"], max_retries=0),
        instance=pg_instance,
        resources={"tab_client": client, "race_db": race_db},
        raise_on_error=False,
    )
    assert not result.success
    run = pg_instance.get_run_by_id(result.run_id)
    assert run.status == dg.DagsterRunStatus.FAILURE
    assert run.tags[TAG_OUTCOME] == "failed"


@pytest.mark.integration
def test_schema_behind_names_the_upgrade_command(pg_instance, fresh_database_url, tab_client) -> None:
    from racing_orchestration.race_db.resource import RaceDatabase

    result = morning_scrape.execute_in_process(
        run_config=_run_config([DAY]),
        instance=pg_instance,
        resources={"tab_client": tab_client, "race_db": RaceDatabase(url=fresh_database_url)},
        raise_on_error=False,
    )
    assert not result.success
    failure = next(e for e in result.all_events if e.event_type_value == "STEP_FAILURE")
    assert "racing db upgrade" in str(failure.step_failure_data.error)


@pytest.mark.integration
def test_invalid_config_is_a_clear_failure(pg_instance, race_db, tab_client) -> None:
    config = _run_config([DAY])
    config["ops"]["plan_scrape_combinations"]["config"]["categories"] = ["X"]
    result = morning_scrape.execute_in_process(
        run_config=config, instance=pg_instance, resources={"tab_client": tab_client, "race_db": race_db},
        raise_on_error=False,
    )
    assert not result.success
    failure = next(e for e in result.all_events if e.event_type_value == "STEP_FAILURE")
    assert "categories" in failure.step_failure_data.error.message


@pytest.mark.unit
@pytest.mark.parametrize(
    ("scheduled_utc", "expected_today"),
    [
        # 06:00 NZDT (UTC+13) on 29 Nov is 17:00 UTC on the 28th: the racing day is the 29th.
        (dt.datetime(2026, 11, 28, 17, 0, tzinfo=dt.UTC), dt.date(2026, 11, 29)),
        # 06:00 NZST (UTC+12) in July.
        (dt.datetime(2026, 7, 16, 18, 0, tzinfo=dt.UTC), dt.date(2026, 7, 17)),
    ],
)
def test_schedule_scrapes_today_and_tomorrow_in_racing_time(scheduled_utc, expected_today) -> None:
    assert morning_scrape_schedule.cron_schedule == "0 6 * * *"
    assert morning_scrape_schedule.execution_timezone == "Pacific/Auckland"
    assert morning_scrape_schedule.default_status == dg.DefaultScheduleStatus.RUNNING
    context = dg.build_schedule_context(scheduled_execution_time=scheduled_utc)
    request = morning_scrape_schedule.evaluate_tick(context).run_requests[0]
    dates = request.run_config["ops"]["plan_scrape_combinations"]["config"]["dates"]
    assert dates == [expected_today.isoformat(), (expected_today + dt.timedelta(days=1)).isoformat()]
    assert dg.validate_run_config(morning_scrape, request.run_config)


@pytest.mark.unit
@pytest.mark.parametrize(
    ("kwargs", "expected"),
    [
        ({}, {"ops": {"plan_scrape_combinations": {"config": {}}}}),
        ({"days": [dt.date(2026, 11, 30)]},
         {"ops": {"plan_scrape_combinations": {"config": {"dates": ["2026-11-30"]}}}}),
        ({"categories": ["T"], "countries": ["NZ"], "max_retries": 0},
         {"ops": {"plan_scrape_combinations": {"config": {"categories": ["T"], "countries": ["NZ"]}},
                  "scrape_combination": {"config": {"max_retries": 0}}}}),
        ({"max_concurrent": 2},
         {"ops": {"plan_scrape_combinations": {"config": {}}}, "execution": {"config": {"max_concurrent": 2}}}),
    ],
)
def test_one_run_config_builder_serves_schedule_cli_and_runner(kwargs, expected) -> None:

    run_config = morning_scrape_run_config(**kwargs)
    assert run_config == expected
    # The webserver validates a queued launch against the job's schema; the same check here keeps the builder honest.
    assert dg.validate_run_config(morning_scrape, run_config) is not None


@pytest.mark.integration
def test_a_past_day_tab_refuses_is_not_retried(pg_instance, race_db, tab_client, sim_feed) -> None:
    sim_feed.feed.config.history_days = 30  # older days answer 404, as a feed that dropped its history
    gone = DAY - dt.timedelta(days=400)
    result = morning_scrape.execute_in_process(
        run_config=_run_config([gone], countries=("NZ",), max_retries=3), instance=pg_instance,
        resources={"tab_client": tab_client, "race_db": race_db}, raise_on_error=False,
    )
    assert not result.success  # every combination failed: the morning scrape's rule
    assert [e for e in result.all_events if e.event_type_value == "STEP_UP_FOR_RETRY"] == []
    run = pg_instance.get_run_by_id(result.run_id)
    assert run.tags[TAG_OUTCOME] == "failed" and "HTTP 404" in run.tags["racing/error"]
    assert "no meetings before" in run.tags["racing/error"]
