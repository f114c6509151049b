"""The monthly doc sync's overdue alert end to end: its last success, 40 days old, survives the nightly retention, the
control API still exports its time on `/metrics` (over HTTP) with the task's interval and grace from its own cron,
and `promtool test rules` with those exported values fires `TaskOverdue` (deploy/prometheus/alerts.yml); 20 days
after a success it does not fire."""

from __future__ import annotations

import datetime as dt
import math
from pathlib import Path

import dagster as dg
import pytest
import yaml

from maintenance_jobs.database.engine import registry_engine
from maintenance_jobs.execution_history.recorder import backfill_history
from orchestration_core.audit.cleanup import prune_successful_runs
from tests.control_api.conftest import RunningApi
from tests.control_api.test_metrics_and_status import samples, value
from tests.deploy.test_prometheus import RULES_FILE, promtool
from tests.orchestration_core.audit.run_factory import (
    RunFactory,
    backdate_finished_run,
    doc_sync_stand_in,
)

pytestmark = [pytest.mark.api, pytest.mark.integration]
S = dg.DagsterRunStatus
TASK = "sync_fastapi_docs_monthly"
TAGS = {"maintenance/task": TASK, "orchestration/kind": "maintenance"}  # what every maintenance run carries
METRIC = "maintenance_task_last_success_timestamp_seconds"
LABELS = {"task": TASK, "executor": "doc_sync_executor"}
EVAL_AFTER = dt.timedelta(minutes=15)  # past the rule's `for: 1m`


def humanize_duration(seconds: int) -> str:
    """Prometheus' humanizeDuration for whole seconds of a day or more (the alert's description)."""
    days, rest = divmod(seconds, 86400)
    hours, rest = divmod(rest, 3600)
    minutes, secs = divmod(rest, 60)
    return f"{days}d {hours}h {minutes}m {secs}s"


def rule_test(last_success_age_s: int, interval_s: float, grace_s: float) -> dict:
    """A promtool case whose clock starts at the scrape: the exported timestamp becomes `-age` seconds (promtool's
    time() is 0 at the start), sampled each minute up to the evaluation 15 minutes later, beside the task's exported
    interval and grace (and a creation long before)."""
    minutes = int(EVAL_AFTER.total_seconds() // 60)
    age_at_eval = last_success_age_s + int(EVAL_AFTER.total_seconds())
    expected = [] if age_at_eval <= interval_s + grace_s + 60 else [{
        "exp_labels": {"severity": "warning", "tier": "job", "location": "maintenance_jobs", **LABELS},
        "exp_annotations": {
            "summary": f"Maintenance task {TASK} has not succeeded for {humanize_duration(age_at_eval)}",
            "description": f"{TASK} (doc_sync_executor) is due every {humanize_duration(int(interval_s))} or sooner. "
                           f"GET /executions?task_name={TASK} lists its runs and their errors.",
        },
    }]
    selector = '{task="%s", executor="doc_sync_executor"}' % TASK
    samples_each_minute = minutes + 5
    return {
        "rule_files": [str(RULES_FILE)],
        "evaluation_interval": "1m",
        "tests": [{
            "interval": "1m",
            "input_series": [
                {"series": f"{METRIC}{selector}", "values": f"{-last_success_age_s}x{samples_each_minute}"},
                {"series": f"maintenance_task_created_timestamp_seconds{selector}",
                 "values": f"{-400 * 86400}x{samples_each_minute}"},
                {"series": f"maintenance_task_expected_interval_seconds{selector}",
                 "values": f"{interval_s:g}x{samples_each_minute}"},
                {"series": f"maintenance_task_grace_seconds{selector}", "values": f"{grace_s:g}x{samples_each_minute}"},
            ],
            "alert_rule_test": [{"eval_time": f"{minutes}m", "alertname": "TaskOverdue", "exp_alerts": expected}],
        }],
    }


@pytest.mark.parametrize(("age_days", "fires"), [(40, True), (20, False)])
def test_doc_sync_overdue_alert_fires_after_40_days_not_after_20(
    api: RunningApi, tmp_path: Path, age_days: int, fires: bool
) -> None:
    instance = api.instance
    factory = RunFactory(instance)
    now = dt.datetime.now(dt.UTC)
    older = factory.recorded(S.SUCCESS, tags=TAGS, job=doc_sync_stand_in)
    backdate_finished_run(instance, older.run_id, now - dt.timedelta(days=age_days + 30))
    last_success = factory.recorded(S.SUCCESS, tags=TAGS, job=doc_sync_stand_in)
    backdate_finished_run(instance, last_success.run_id, now - dt.timedelta(days=age_days))

    # Recorded in the execution history as they ended (retention keeps a maintenance run until it is).
    assert backfill_history(instance, registry_engine(api.registry_url), now).recorded
    report = prune_successful_runs(instance, 14)  # the nightly retention, 14 days

    assert instance.get_run_by_id(older.run_id) is None and report.deleted == 1
    assert instance.get_run_by_id(last_success.run_id) is not None
    with api.client() as client:
        assert client.get(f"/tasks/{TASK}").status_code == 200  # seeded with the registry (monthly, on the 11th)
        scraped = client.get("/metrics")
        executions = client.get("/executions", params={"task_name": TASK})
    assert scraped.status_code == 200 and executions.status_code == 200
    # Both stay on record in the execution history; only the latest is still a Dagster run.
    assert [(e["run_id"], e["status"], e["run_pruned"]) for e in executions.json()] == [
        (last_success.run_id, "success", False), (older.run_id, "success", True)]
    found = samples(scraped.text)
    exported = value(found, METRIC, **LABELS)
    assert exported is not None, "the doc sync's last success is no longer exported"
    interval = value(found, "maintenance_task_expected_interval_seconds", **LABELS)
    grace = value(found, "maintenance_task_grace_seconds", **LABELS)
    assert (interval, grace) == (31 * 86400, 1800 * 2 + 3600)  # its longest month; timeout x 2 attempts + 1 h
    scraped_at = dt.datetime.now(dt.UTC).timestamp()
    age_s = math.ceil(scraped_at - exported)
    assert abs(age_s - age_days * 86400) < 600

    case = tmp_path / "doc_sync_overdue_test.yml"
    case.write_text(yaml.safe_dump(rule_test(age_s, interval, grace)))
    result = promtool("test", "rules", str(case))
    assert result.returncode == 0, result.stdout + result.stderr
    assert bool(rule_test(age_s, interval, grace)["tests"][0]["alert_rule_test"][0]["exp_alerts"]) is fires


def test_the_rule_case_can_fail(tmp_path: Path) -> None:
    """The generated case is a real check: claiming the 40-day alert silent (or the 20-day one firing) fails promtool."""
    for age_days, wrong in ((40, []), (20, [{"exp_labels": {"severity": "warning", **LABELS}}])):
        case = rule_test(age_days * 86400, 31 * 86400, 7200)
        case["tests"][0]["alert_rule_test"][0]["exp_alerts"] = wrong
        path = tmp_path / f"wrong_{age_days}.yml"
        path.write_text(yaml.safe_dump(case))
        assert promtool("test", "rules", str(path)).returncode != 0
