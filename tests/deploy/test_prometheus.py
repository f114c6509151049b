"""Prometheus config and alert rules through `promtool` (Debian's `prometheus` package; make test installs it),
and a check that the rules use the control API's metrics only."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest
import yaml

from tests.deploy.compose_model import REPO_ROOT
from tests.deploy.exported_metrics import series_names
from tests.deploy.promql import unknown_metrics

pytestmark = pytest.mark.unit

PROMETHEUS_DIR = REPO_ROOT / "deploy" / "prometheus"
RULES_FILE = PROMETHEUS_DIR / "alerts.yml"
# promtool's cases: those that pin a boundary to the minute, and those that wait a day or more (evaluated every 10
# minutes: at a minute's interval those took ~15 of the ~20 CPU-s promtool spent).
RULE_TESTS = (Path(__file__).with_name("alerts_test.yml"), Path(__file__).with_name("alerts_test_days.yml"))
# Every alert of docs/alerts.md (tests/deploy/test_alert_docs.py checks the document against the rules).
REQUIRED_ALERTS = {"Watchdog", "DagsterDaemonDown", "CodeServerDown", "ControlApiMetricsMissing", "MetricsSourceFailing",
                   "InstigatorTicksFailing", "InstigatorStopped", "InstigatorNotTicking", "JobFailureRateHigh",
                   "JobOverdue", "TaskOverdue", "CleanupNeverRun", "RetriesAboveMaximum", "RacingDayIncomplete",
                   "RacingDayNotChecked", "RacingDayNeverChecked", "BackupMissing", "BackupNeverSucceeded"}


def promtool(*args: str) -> subprocess.CompletedProcess[str]:
    """Run promtool; without it the test fails (never skips) and says how to install it."""
    executable = shutil.which("promtool")
    if executable is None:
        pytest.fail("promtool not found: install Debian's prometheus package "
                    "(apt-get install --no-install-recommends prometheus); make test does this")
    return subprocess.run([executable, *args], capture_output=True, text=True, timeout=120)


def alert_rules(path: Path = RULES_FILE) -> list[dict]:
    return [rule for group in yaml.safe_load(path.read_text())["groups"] for rule in group["rules"] if "alert" in rule]


def recorded_names(path: Path = RULES_FILE) -> frozenset[str]:
    """The series the recording rules write (alert_condition:*), which the alerts read besides the API's metrics,
    and Prometheus' own ALERTS series (an alert already firing stays firing through an outage)."""
    groups = yaml.safe_load(path.read_text())["groups"]
    return frozenset({rule["record"] for group in groups for rule in group["rules"] if "record" in rule} | {"ALERTS"})


def test_prometheus_config_is_valid() -> None:
    result = promtool("check", "config", str(PROMETHEUS_DIR / "prometheus.yml"))
    assert result.returncode == 0, result.stdout + result.stderr
    assert "SUCCESS" in result.stdout


def test_alert_rules_are_valid() -> None:
    result = promtool("check", "rules", str(RULES_FILE))
    assert result.returncode == 0, result.stdout + result.stderr


def test_promtool_rejects_a_broken_rule(tmp_path: Path) -> None:
    broken = tmp_path / "alerts.yml"
    broken.write_text(RULES_FILE.read_text().replace("> 0.10", "> > 0.10", 1))
    assert promtool("check", "rules", str(broken)).returncode != 0


@pytest.mark.parametrize("cases", RULE_TESTS, ids=lambda path: path.name)
def test_alert_rules_fire_as_specified(cases: Path) -> None:
    # Unit tests of each alert on synthetic series: when it fires, when it does not, and its labels and text.
    result = promtool("test", "rules", str(cases))
    assert result.returncode == 0, result.stdout + result.stderr


def test_the_scrape_targets_the_control_api_and_alerts_go_to_alertmanager() -> None:
    config = yaml.safe_load((PROMETHEUS_DIR / "prometheus.yml").read_text())
    api_job = next(job for job in config["scrape_configs"] if job["job_name"] == "control-api")
    assert api_job["metrics_path"] == "/metrics"
    assert api_job["static_configs"][0]["targets"] == ["api:8090"]
    assert config["rule_files"] == ["alerts.yml"]
    assert config["alerting"]["alertmanagers"][0]["static_configs"][0]["targets"] == ["alertmanager:9093"]
    # The metrics' `job` is the Dagster job: Prometheus must not replace it with the scrape job's name (it did until
    # the live alert test ran a real Prometheus: JobFailureRateHigh summed every job as job="control-api").
    assert api_job["honor_labels"] is True


def test_every_rule_has_a_promtool_case() -> None:
    """Each alert is evaluated by at least one case of alerts_test.yml or alerts_test_days.yml (firing or
    must-not-fire)."""
    cases = [case for path in RULE_TESTS for case in yaml.safe_load(path.read_text())["tests"]]
    tested = {check["alertname"] for case in cases for check in case["alert_rule_test"]}
    assert tested == REQUIRED_ALERTS


@pytest.mark.parametrize("rule", alert_rules(), ids=lambda rule: rule["alert"])
def test_the_tiers_inhibition_relies_on(rule: dict) -> None:
    """Alertmanager mutes tier "job" while the daemon (or the location's code server) is down: the platform alerts
    must not be in it, and every alert has a tier."""
    platform = {"DagsterDaemonDown", "CodeServerDown", "ControlApiMetricsMissing", "MetricsSourceFailing"}
    expected = "watchdog" if rule["alert"] == "Watchdog" else "platform" if rule["alert"] in platform else "job"
    assert rule["labels"]["tier"] == expected


def test_required_alerts_exist() -> None:
    assert {rule["alert"] for rule in alert_rules()} == REQUIRED_ALERTS


@pytest.mark.parametrize("rule", alert_rules(), ids=lambda rule: rule["alert"])
def test_alert_rules_use_only_exported_metrics(rule: dict) -> None:
    assert not unknown_metrics(rule["expr"], series_names() | recorded_names()), rule["expr"]
    assert rule["labels"]["severity"] in ({"none"} if rule["alert"] == "Watchdog" else {"warning", "critical"})
    assert rule["annotations"]["summary"]


def test_recording_rules_read_only_exported_metrics() -> None:
    groups = yaml.safe_load(RULES_FILE.read_text())["groups"]
    records = [rule for group in groups for rule in group["rules"] if "record" in rule]
    assert {rule["record"] for rule in records} == {"alert_condition:instigator_ticks_failing",
                                                     "alert_condition:instigator_tick_late_seconds",
                                                     "alert_condition:job_overdue_seconds",
                                                     "alert_condition:task_overdue_seconds"}
    for rule in records:
        assert not unknown_metrics(rule["expr"], series_names()), rule["expr"]


def test_the_live_tests_configuration_is_the_production_one_with_shorter_intervals(tmp_path: Path) -> None:
    from tests.deploy.alert_path import prometheus_config

    path = prometheus_config(tmp_path, interval="5s")
    result = promtool("check", "config", str(path))
    assert result.returncode == 0, result.stdout + result.stderr
    generated, production = (yaml.safe_load(p.read_text()) for p in (path, PROMETHEUS_DIR / "prometheus.yml"))
    assert generated["global"]["evaluation_interval"] == "5s"
    assert {k: v for k, v in generated.items() if k != "global"} == {
        **{k: v for k, v in production.items() if k not in ("global", "scrape_configs")},
        "scrape_configs": [{k: v for k, v in job.items() if k != "scrape_timeout"}
                           for job in production["scrape_configs"]]}
    assert (tmp_path / "alerts.yml").read_text() == RULES_FILE.read_text()
