"""InstigatorTicksFailing's interval threshold, end to end: a schedule's interval as the control API exports it (from
its cron, platform_monitoring.schedulers) fed to the real rules through `promtool test rules`. A single failed tick
pages for anything that ticks every 10 minutes or less often (a 30-minute schedule's failed tick is half an hour
without its run); what ticks more often needs 3 failed ticks in a row. Rows sit on each side of the threshold."""

from __future__ import annotations

import datetime as dt
from pathlib import Path
from types import SimpleNamespace

import pytest
import yaml

from dagster._core.scheduler.instigation import TickStatus  # tests fabricate ticks: no public constructor
from platform_monitoring.alert_metrics import instigator_families
from platform_monitoring.catalog import Definition
from platform_monitoring.schedulers import tick_state
from tests.deploy.test_prometheus import RULES_FILE, promtool

pytestmark = pytest.mark.unit

NOW = dt.datetime(2026, 12, 1, 12, 0, tzinfo=dt.UTC)
LOCATION = "racing_orchestration"


def schedule(name: str, cron: str) -> Definition:
    return Definition(LOCATION, "__repository__", "schedule", name, True, cron_schedule=cron,
                      timezone="Pacific/Auckland", job_name="some_job")


def sensor(name: str, seconds: int) -> Definition:
    return Definition(LOCATION, "__repository__", "sensor", name, True, minimum_interval_seconds=seconds)


# (definition, failed ticks in a row, its exported interval, pages?)
ROWS = [
    (schedule("every_5_minutes", "*/5 * * * *"), 1, 300, False),
    (schedule("every_5_minutes_twice", "*/5 * * * *"), 2, 300, False),
    (schedule("every_5_minutes_thrice", "*/5 * * * *"), 3, 300, True),
    (sensor("just_under_10_minutes", 599), 1, 599, False),
    (sensor("just_under_10_minutes_twice", 599), 2, 599, False),
    (sensor("at_10_minutes", 600), 1, 600, True),
    (schedule("every_10_minutes", "*/10 * * * *"), 1, 600, True),
    (schedule("every_30_minutes", "*/30 * * * *"), 1, 1800, True),
    (schedule("on_the_half_hour", "0,30 * * * *"), 1, 1800, True),
    (sensor("every_20_minutes", 1200), 1, 1200, True),
    (schedule("hourly", "0 * * * *"), 1, 3600, True),
    (schedule("every_6_hours", "0 */6 * * *"), 1, 6 * 3600, True),
    (schedule("daily", "0 6 * * *"), 1, 86400, True),
]


def failing_state(item: Definition, failed: int):
    ticks = [SimpleNamespace(status=TickStatus.FAILURE, timestamp=NOW.timestamp() - 5,
                             consecutive_failure_count=failed, failure_count=failed, error=None)]
    return tick_state(item, None, ticks, NOW)


def exported_series(states) -> list[dict]:
    """The samples the control API exports for these states, as promtool input series (constant for 5 minutes)."""
    series = [{"series": "orchestration_code_server_up{location=\"%s\"}" % LOCATION, "values": "1x5"},
              {"series": "orchestration_daemon_up", "values": "1x5"}]
    for family in instigator_families(states):
        for sample in family.samples:
            labels = ", ".join(f'{key}="{value}"' for key, value in sorted(sample.labels.items()))
            series.append({"series": f"{sample.name}{{{labels}}}", "values": f"{sample.value:g}x5"})
    return series


@pytest.mark.parametrize(("item", "failed", "interval", "pages"), ROWS, ids=[row[0].name for row in ROWS])
def test_the_exported_interval_of_each_row(item: Definition, failed: int, interval: int, pages: bool) -> None:
    state = failing_state(item, failed)
    assert (state.interval_seconds, state.failed_in_a_row, state.running) == (interval, failed, True)


def test_one_failed_tick_pages_from_a_10_minute_interval(tmp_path: Path) -> None:
    states = [failing_state(item, failed) for item, failed, _, _ in ROWS]
    expected = [{"exp_labels": {"severity": "critical", "tier": "job", "location": LOCATION, "type": item.kind,
                                "name": item.name},
                 "exp_annotations": {
                     "summary": f"{item.kind} {item.name} ({LOCATION}): {failed} failed ticks in a row",
                     "description": f"The last error is no longer on record. Open the {item.kind} in the Dagster UI "
                                    "(Automation) for its tick history."}}
                for item, failed, _, pages in ROWS if pages]
    cases = {"rule_files": [str(RULES_FILE)], "evaluation_interval": "1m",
             "tests": [{"interval": "1m", "input_series": exported_series(states),
                        "alert_rule_test": [{"eval_time": "2m", "alertname": "InstigatorTicksFailing",
                                             "exp_alerts": expected}]}]}
    path = tmp_path / "threshold_test.yml"
    path.write_text(yaml.safe_dump(cases, sort_keys=False))
    result = promtool("test", "rules", str(path))
    assert result.returncode == 0, result.stdout + result.stderr
