"""Alert sensors against Postgres and a real local webhook server: one POST per failure/partial/missed window."""

from __future__ import annotations

from datetime import UTC, datetime, time, timedelta

import dagster as dg
import pytest

from orchestration_core.audit.alert_webhook import AlertDeliveryError, AlertWebhook
from orchestration_core.audit.alerts import (
    DailyDeadline,
    MaxAge,
    make_freshness_sensor,
    partial_outcome_alert,
    run_failure_alert,
)
from tests.orchestration_core.audit.run_factory import RunFactory, partial_tags

pytestmark = pytest.mark.integration
S = dg.DagsterRunStatus


class Ticker:
    """Evaluates a sensor tick after tick, carrying the cursor like the daemon does."""

    def __init__(self, sensor: dg.SensorDefinition, instance: dg.DagsterInstance, webhook: AlertWebhook):
        self.sensor, self.instance, self.webhook, self.cursor = sensor, instance, webhook, None

    def tick(self):
        with dg.build_sensor_context(
            instance=self.instance, cursor=self.cursor, resources={"alert_webhook": self.webhook}
        ) as context:
            result = self.sensor.evaluate_tick(context)
        self.cursor = result.cursor
        return result


def test_failure_alert_fires_once_per_failure(pg_instance, webhook) -> None:
    factory = RunFactory(pg_instance)
    factory.recorded(S.FAILURE)  # before the sensor started: never back-processed
    ticker = Ticker(run_failure_alert, pg_instance, AlertWebhook(url=webhook.url))
    assert "Initiating" in ticker.tick().skip_message

    failed = factory.executed(succeed=False)
    factory.executed(succeed=True)
    ticker.tick()
    assert len(webhook.posts) == 1
    body = webhook.posts[0]
    assert body["text"].startswith("Run failed: audit_flaky_job")
    assert failed.run_id in body["text"] and "upstream feed unavailable" in body["text"]
    assert body["blocks"][0]["type"] == "section"

    for _ in range(3):
        ticker.tick()
    assert len(webhook.posts) == 1  # not on every tick

    second = factory.recorded(S.FAILURE, tags={"racing/error": "TAB API 503"})
    ticker.tick()
    ticker.tick()
    assert len(webhook.posts) == 2
    assert second.run_id in webhook.posts[1]["text"] and "TAB API 503" in webhook.posts[1]["text"]


def test_partial_alert_only_for_partial_successes(pg_instance, webhook) -> None:
    factory = RunFactory(pg_instance)
    ticker = Ticker(partial_outcome_alert, pg_instance, AlertWebhook(url=webhook.url))
    ticker.tick()
    plain = factory.recorded(S.SUCCESS)
    partial = factory.recorded(S.SUCCESS, tags=partial_tags(10, 2))
    factory.recorded(S.FAILURE)
    ticker.tick()
    ticker.tick()
    assert [p["text"].splitlines()[0] for p in webhook.posts] == ["Partial outcome: audit_sample_job"]
    assert partial.run_id in webhook.posts[0]["text"] and plain.run_id not in webhook.posts[0]["text"]
    assert "10 items processed, 2 failed" in webhook.posts[0]["text"]


def test_a_job_alerting_on_change_alerts_once_per_outage_and_on_recovery(pg_instance, webhook) -> None:
    """card_refresh's tag: a TAB outage over four refreshes alerts once when it starts, once for the partial run on the
    way back, and once on recovery; any other job alerts on every failure."""
    factory = RunFactory(pg_instance)
    on_change = {"orchestration/alerts": "on_change"}
    failures = Ticker(run_failure_alert, pg_instance, AlertWebhook(url=webhook.url))
    partials = Ticker(partial_outcome_alert, pg_instance, AlertWebhook(url=webhook.url))
    failures.tick(), partials.tick()

    def refresh(status: dg.DagsterRunStatus, tags: dict[str, str] | None = None) -> dg.DagsterRun:
        run = factory.recorded(status, tags=on_change | (tags or {}))
        failures.tick(), partials.tick()
        return run

    refresh(S.SUCCESS)
    first = refresh(S.FAILURE)
    refresh(S.FAILURE)
    refresh(S.FAILURE)
    partial = refresh(S.SUCCESS, partial_tags(4, 2))
    refresh(S.SUCCESS, partial_tags(5, 1))
    back = refresh(S.SUCCESS)
    refresh(S.SUCCESS)
    titles = [p["text"].splitlines()[0] for p in webhook.posts]
    assert titles == ["Run failed: audit_sample_job", "Partial outcome: audit_sample_job",
                      "Recovered: audit_sample_job"]
    assert first.run_id in webhook.posts[0]["text"] and partial.run_id in webhook.posts[1]["text"]
    assert back.run_id in webhook.posts[2]["text"] and "after a partial run" in webhook.posts[2]["text"]

    factory.recorded(S.FAILURE)  # untagged: every failure alerts
    factory.recorded(S.FAILURE)
    failures.tick()
    assert len(webhook.posts) == 5


@pytest.mark.parametrize("with_webhook", [False, True], ids=["no-webhook", "webhook"])
def test_a_tick_mixing_on_change_and_plain_runs_is_accepted(pg_instance, webhook, with_webhook: bool) -> None:
    """One tick of partial_outcome_alert over a plain success, then a partial run and a recovery of a job alerting
    on change. Dagster refuses a tick whose runs return both None (a run reaction) and a SkipReason: the sensor must
    answer every run the same way, with a webhook or without (the compose default), and move past all of them."""
    factory = RunFactory(pg_instance)
    on_change = {"orchestration/alerts": "on_change"}
    factory.recorded(S.FAILURE, tags=on_change)  # the on-change job's previous run: its next success is a recovery
    hook = AlertWebhook(url=webhook.url) if with_webhook else AlertWebhook()
    ticker = Ticker(partial_outcome_alert, pg_instance, hook)
    ticker.tick()  # the first tick only sets the cursor
    factory.recorded(S.SUCCESS)
    partial = factory.recorded(S.SUCCESS, tags=partial_tags(3, 1))
    recovered = factory.recorded(S.SUCCESS, tags=on_change)
    factory.recorded(S.SUCCESS)

    result = ticker.tick()  # without a webhook, reactions and a SkipReason together must not raise CheckError

    assert {reaction.dagster_run.run_id for reaction in result.dagster_run_reactions} >= {partial.run_id,
                                                                                         recovered.run_id}
    titles = [p["text"].splitlines()[0] for p in webhook.posts]
    assert titles == (["Partial outcome: audit_sample_job", "Recovered: audit_sample_job"] if with_webhook else [])
    factory.recorded(S.SUCCESS, tags=partial_tags(2, 2))
    later = ticker.tick()  # the cursor moved past the mixed tick: only the new run is seen
    assert len(later.dagster_run_reactions) == 1
    assert len(webhook.posts) == (3 if with_webhook else 0)


def test_disabled_webhook_skips_with_reason(pg_instance, webhook) -> None:
    ticker = Ticker(run_failure_alert, pg_instance, AlertWebhook())
    ticker.tick()
    RunFactory(pg_instance).recorded(S.FAILURE)
    result = ticker.tick()
    assert "ALERT_WEBHOOK_URL is not set" in result.skip_message
    assert webhook.posts == []


def test_webhook_errors_are_reported_without_the_url(webhook) -> None:
    webhook.status = 500
    hook = AlertWebhook(url=webhook.url, attempts=2, retry_delay_seconds=0.01)
    with pytest.raises(AlertDeliveryError, match="after 2 attempt") as excinfo:
        hook.post({"text": "x"})
    assert webhook.url not in str(excinfo.value)
    assert len(webhook.posts) == 2  # retried the 5xx
    webhook.status = 400
    with pytest.raises(AlertDeliveryError, match="HTTP 400"):
        hook.post({"text": "x"})
    assert len(webhook.posts) == 3  # a 4xx is not retried


@dg.job(name="morning_scrape")
def fake_morning_scrape() -> None:
    """Stands in for the real job: only the name matters to the freshness check."""


def test_freshness_alerts_once_per_missed_window(pg_instance, webhook, monkeypatch) -> None:
    monkeypatch.setenv("RACING_TIMEZONE", "Pacific/Auckland")
    # 2025-06-10 (NZST, +12): 05:00 local is 17:00 UTC on the 9th.
    clock = {"now": datetime(2025, 6, 9, 17, 0, tzinfo=UTC)}
    sensor = make_freshness_sensor(
        [DailyDeadline("morning_scrape", time(6, 30)), MaxAge("cleanup_job_runs", timedelta(hours=25))],
        clock=lambda: clock["now"],
    )
    ticker = Ticker(sensor, pg_instance, AlertWebhook(url=webhook.url))
    assert "succeeded within" in ticker.tick().skip_message  # 05:00, before the deadline: nothing due
    clock["now"] += timedelta(hours=1, minutes=35)  # 06:35 local, no morning_scrape success
    assert "alerted: morning_scrape:2025-06-10" in ticker.tick().skip_message
    clock["now"] += timedelta(minutes=5)
    ticker.tick()
    clock["now"] += timedelta(hours=12)
    ticker.tick()
    assert [p["text"].splitlines()[0] for p in webhook.posts] == ["Missed schedule: morning_scrape"]
    assert "had not succeeded by 06:30 Pacific/Auckland on 2025-06-10" in webhook.posts[0]["text"]

    # The cleanup has never succeeded since watching began (05:00 on the 10th): 25 h later it alerts, once.
    clock["now"] = datetime(2025, 6, 10, 18, 5, tzinfo=UTC)
    ticker.tick()
    assert webhook.posts[-1]["text"].startswith("Missed schedule: cleanup_job_runs")
    assert "within 25 h (no success seen yet)" in webhook.posts[-1]["text"]
    # The next morning (06:35 local on the 11th) the scrape is missed again: a new window, a new alert.
    clock["now"] = datetime(2025, 6, 10, 18, 35, tzinfo=UTC)
    ticker.tick()
    assert len(webhook.posts) == 3 and "2025-06-11" in webhook.posts[2]["text"]
    ticker.tick()
    assert len(webhook.posts) == 3


def test_freshness_satisfied_by_real_success(pg_instance, webhook, monkeypatch) -> None:
    monkeypatch.setenv("RACING_TIMEZONE", "UTC")
    now = datetime.now(UTC)
    sensor = make_freshness_sensor([MaxAge("morning_scrape", timedelta(hours=25))], clock=lambda: now)
    RunFactory(pg_instance).recorded(S.SUCCESS, job=fake_morning_scrape)
    ticker = Ticker(sensor, pg_instance, AlertWebhook(url=webhook.url))
    ticker.cursor = '{"watching_since": "2020-01-01T00:00:00+00:00", "alerted": []}'
    ticker.tick()
    assert webhook.posts == []
