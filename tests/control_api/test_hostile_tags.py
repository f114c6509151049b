"""One run's tags must not take down the views every run shares: `/executions`, the history writer and `/metrics`,
on real Postgres over real HTTP, with runs created through the Dagster instance's public API carrying hostile tags
(anyone on the webserver's port can launch a run with any tags). An unreadable tag is shown as absent, a number
clamped (maintenance_jobs/execution_history/tag_values.py), and every other run is still listed and recorded."""

from __future__ import annotations

import datetime as dt

import dagster as dg
import pytest
import sqlalchemy as sa
from prometheus_client.parser import text_string_to_metric_families

from maintenance_jobs.database.migrate import upgrade
from maintenance_jobs.execution_history.recorder import backfill_history
from maintenance_jobs.jobs import example_executor_job
from tests.control_api.conftest import RunningApi

pytestmark = [pytest.mark.api, pytest.mark.integration]

CONFIG = {"ops": {"run_example_executor": {"config": {"message": "x", "delay_seconds": 0}}}}
BASE_TAGS = {"orchestration/kind": "maintenance", "maintenance/task": "hostile", "maintenance/service": "scheduler",
             "maintenance/executor": "example_executor", "maintenance/triggered_by": "scheduler",
             "maintenance/priority": "50"}
HUGE = "9" * 400
# Each: (tag, hostile value, what /executions and the history show for it).
HOSTILE = [
    ("maintenance/scheduled_minute", "9999-12-31T23:59-14:00", ("scheduled_for", None)),
    ("maintenance/scheduled_minute", "9999-12-31T23:59+00:00", ("scheduled_for", None)),
    ("maintenance/scheduled_minute", "0001-01-01T00:00+14:00", ("scheduled_for", None)),
    ("maintenance/scheduled_minute", "0001-01-01T00:00+00:00", ("scheduled_for", None)),
    ("maintenance/scheduled_minute", "not a minute", ("scheduled_for", None)),
    ("maintenance/scheduled_minute", "2025-06-03T03:05+12:00" + "0" * 5000, ("scheduled_for", None)),
    ("dagster/retry_number", HUGE, ("retry_count", 1_000_000)),
    ("dagster/retry_number", "2147483648", ("retry_count", 1_000_000)),
    ("dagster/retry_number", "-3", ("retry_count", 0)),
    ("dagster/retry_number", "\u0663", ("retry_count", 0)),  # ARABIC-INDIC DIGIT THREE: int() reads it, we do not
    ("maintenance/priority", HUGE, ("priority", 100)),
    ("maintenance/priority", "-7", ("priority", 1)),
    ("maintenance/triggered_by", "x" * 30, ("triggered_by", None)),
    ("maintenance/service", "s" * 300, ("service", "s" * 255)),
    ("maintenance/executor", "e" * 300, ("executor", "e" * 255)),
    ("maintenance/output", "o" * 100_000, ("output", "o" * 2_000)),
]
IDS = [f"{tag.split('/')[1]}={value[:24]}" for tag, value, _ in HOSTILE]


def create_run(instance: dg.DagsterInstance, *, ended: bool, **tags: str) -> str:
    run = instance.create_run_for_job(example_executor_job, run_config=CONFIG, tags=BASE_TAGS | tags)
    if ended:
        instance.report_run_failed(run, "ended for the test")
    return run.run_id


def all_pages(api: RunningApi) -> list[dict]:
    items = []
    with api.client() as client:
        response = client.get("/executions", params={"limit": 5})
        while True:
            assert response.status_code == 200, response.text[:500]
            items += response.json()
            if "next" not in response.links:
                return items
            response = client.get(response.links["next"]["url"])


@pytest.mark.parametrize(("ended",), [(False,), (True,)], ids=["live", "recorded"])
def test_hostile_tags_neither_break_executions_nor_stop_the_history_writer(api: RunningApi, ended: bool) -> None:
    instance = api.instance
    plain_before = create_run(instance, ended=ended)
    hostile = {create_run(instance, ended=ended, **{tag: value}): shown for tag, value, shown in HOSTILE}
    plain_after = create_run(instance, ended=ended)
    if ended:
        upgrade(api.registry_url)
        engine = sa.create_engine(api.registry_url)
        try:
            report = backfill_history(instance, engine, dt.datetime.now(dt.UTC))
        finally:
            engine.dispose()
        assert report.failed == {} and report.caught_up, report.summary()[:2000]
        assert set(report.recorded) == {plain_before, plain_after, *hostile}
    items = {item["run_id"]: item for item in all_pages(api)}
    assert set(items) == {plain_before, plain_after, *hostile}
    for run_id, (field, expected) in hostile.items():
        assert items[run_id]["recorded"] is ended
        assert items[run_id][field] == expected, (field, str(items[run_id][field])[:80])


def test_hostile_tags_leave_metrics_served_with_clamped_numbers(api: RunningApi) -> None:
    instance = api.instance
    for value in (HUGE, "1" + "0" * 5000, "2147483648", "7", "-4", "\u0663"):
        create_run(instance, ended=True, **{"dagster/retry_number": value, "racing/items_processed": HUGE,
                                            "racing/items_failed": value})
    with api.client(None) as client:
        response = client.get("/metrics")
    assert response.status_code == 200, response.text[:500]
    found = {(s.name, tuple(sorted(s.labels.items()))): s.value
             for family in text_string_to_metric_families(response.text) for s in family.samples}
    assert found[("maintenance_api_metrics_errors", (("source", "runs"),))] == 0
    highest = [v for (name, labels), v in found.items() if name == "orchestration_run_retry_highest"
               and dict(labels)["job"] == "example_executor" and dict(labels)["window"] == "1h"]
    assert highest == [1_000_000]  # clamped, still far above any task's max_retries: the alert fires
    processed = [v for (name, labels), v in found.items() if name == "orchestration_items_processed"
                 and dict(labels) == {"job": "example_executor", "window": "1h"}]
    assert processed == [6 * 1_000_000_000]
    retries = {dict(labels)["retry_number"] for (name, labels), _ in found.items()
               if name == "orchestration_run_retries" and dict(labels)["job"] == "example_executor"}
    assert retries == {"1000000", "7"}
