"""Alertmanager's configuration (deploy/alertmanager): `amtool check-config`, the routing tree through
`amtool config routes test`, and a real Alertmanager (Debian's prometheus-alertmanager; make test installs it) posting
to a local webhook receiver: one message per incident, inhibition by a down daemon or code server, "resolved"."""

from __future__ import annotations

import datetime as dt
import shutil
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
import yaml

from local_stack.stack import free_port
from tests.deploy.alert_path import ALERTMANAGER_CONFIG, AlertMessage, alert_key, alert_messages, alertmanager_config
from tests.deploy.webhook_receiver import Receiver, serve

pytestmark = pytest.mark.unit
ALERTMANAGER_BINARIES = ("prometheus-alertmanager", "alertmanager")


def tool(name: str) -> str:
    """A tool of Debian's prometheus-alertmanager package; without it the test fails (never skips)."""
    found = shutil.which(name)
    if found is None:
        pytest.fail(f"{name} not found: install Debian's prometheus-alertmanager package "
                    "(apt-get install --no-install-recommends prometheus-alertmanager); make test does this")
    return found


def amtool(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([tool("amtool"), *args], capture_output=True, text=True, timeout=60)


def test_the_configuration_and_its_template_are_valid() -> None:
    result = amtool("check-config", str(ALERTMANAGER_CONFIG))
    assert result.returncode == 0, result.stdout + result.stderr
    assert "1 templates" in result.stdout and "2 inhibit rules" in result.stdout


def test_amtool_rejects_a_broken_configuration(tmp_path: Path) -> None:
    broken = tmp_path / "alertmanager.yml"
    broken.write_text(ALERTMANAGER_CONFIG.read_text().replace("receiver: watchdog", "receiver: nobody", 1))
    (tmp_path / "slack.tmpl").write_text((ALERTMANAGER_CONFIG.parent / "slack.tmpl").read_text())
    assert amtool("check-config", str(broken)).returncode != 0


@pytest.mark.parametrize(
    ("labels", "receiver"),
    [
        (["alertname=Watchdog", "severity=none", "tier=watchdog"], "watchdog"),
        (["alertname=DagsterDaemonDown", "severity=critical", "tier=platform"], "webhook"),
        (["alertname=CodeServerDown", "location=racing_orchestration"], "webhook"),
        (["alertname=InstigatorTicksFailing", "location=racing_orchestration", "name=pre_race_t15_sensor",
          "tier=job"], "webhook"),
        (["alertname=TaskOverdue", "task=backup_docker_configs_daily", "location=maintenance_jobs"], "webhook"),
    ],
)
def test_routing_tree(labels: list[str], receiver: str) -> None:
    result = amtool("config", "routes", "test", f"--config.file={ALERTMANAGER_CONFIG}", *labels)
    assert result.returncode == 0, result.stdout + result.stderr
    assert result.stdout.strip() == receiver


def test_the_routing_test_can_fail() -> None:
    result = amtool("config", "routes", "test", f"--config.file={ALERTMANAGER_CONFIG}", "--verify.receivers=watchdog",
                    "alertname=DagsterDaemonDown")
    assert result.returncode != 0


def test_the_live_tests_configuration_changes_only_the_timings(tmp_path: Path) -> None:
    path = alertmanager_config(tmp_path, group_wait="30s", group_interval="30s")
    result = amtool("check-config", str(path))
    assert result.returncode == 0, result.stdout + result.stderr
    generated, production = (yaml.safe_load(p.read_text()) for p in (path, ALERTMANAGER_CONFIG))
    assert generated["route"].pop("group_interval") == "30s" and production["route"].pop("group_interval") == "5m"
    assert generated == production


def test_grouping_and_send_resolved_are_the_documented_ones() -> None:
    config = yaml.safe_load(ALERTMANAGER_CONFIG.read_text())
    assert config["route"]["group_by"] == ["alertname", "location"]
    assert {r["name"]: [s["send_resolved"] for s in r["slack_configs"]] for r in config["receivers"]} == {
        "webhook": [True], "watchdog": [False]}


# ---- a real Alertmanager ----------------------------------------------------------------------------------------


class RunningAlertmanager:
    def __init__(self, url: str, receiver: Receiver) -> None:
        self.url, self.receiver = url, receiver

    def post(self, *alerts: dict) -> None:
        response = httpx.post(f"{self.url}/api/v2/alerts", json=list(alerts), timeout=10)
        assert response.status_code == 200, response.text

    def messages(self) -> list[AlertMessage]:
        with self.receiver.lock:
            return alert_messages(list(self.receiver.messages))

    def wait_for(self, what: str, predicate, timeout: float = 30) -> list[AlertMessage]:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if predicate(found := self.messages()):
                return found
            time.sleep(0.1)
        raise AssertionError(f"no {what} within {timeout} s: {self.messages()}")


def alert(alertname: str, **labels: str) -> dict:
    return {"labels": {"alertname": alertname, **labels},
            "annotations": {"summary": f"{alertname} summary", "description": "what to check"},
            # Now, as Prometheus stamps an alert that has just fired. (Alertmanager flushes a group at once when an
            # alert in it started more than group_wait ago, so an older startsAt sends the first alert on its own.)
            "startsAt": dt.datetime.now(dt.UTC).isoformat()}


@pytest.fixture
def alertmanager(tmp_path: Path) -> Iterator[RunningAlertmanager]:
    binary = next((found for name in ALERTMANAGER_BINARIES if (found := shutil.which(name))), None) \
        or tool(ALERTMANAGER_BINARIES[0])
    receiver, _ = serve()
    url_file = tmp_path / "webhook_url"
    url_file.write_text(f"http://127.0.0.1:{receiver.server_address[1]}/hooks/alerts")
    # The production file with a 5 s group_wait and 3 s group_interval (30 s and 5 min in production): enough on a
    # loaded host for all alerts of one post to be in before a group's first message.
    config = alertmanager_config(tmp_path / "config", group_wait="5s", group_interval="3s", url_file=str(url_file))
    port = free_port()
    process = subprocess.Popen([binary, f"--config.file={config}", f"--storage.path={tmp_path / 'data'}",
                                f"--web.listen-address=127.0.0.1:{port}", "--cluster.listen-address="],
                               stdout=subprocess.DEVNULL, stderr=(tmp_path / "alertmanager.log").open("w"))
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 30
        while True:
            try:
                if httpx.get(f"{url}/-/ready", timeout=2).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            assert process.poll() is None and time.monotonic() < deadline, (tmp_path / "alertmanager.log").read_text()
            time.sleep(0.1)
        yield RunningAlertmanager(url, receiver)
    finally:
        process.terminate()
        process.wait(timeout=30)
        receiver.shutdown()
        receiver.server_close()


JOB = {"severity": "critical", "tier": "job"}
PLATFORM = {"severity": "critical", "tier": "platform"}


def test_one_incident_is_one_message_then_one_resolved(alertmanager: RunningAlertmanager) -> None:
    sensors = [alert("InstigatorTicksFailing", location="racing_orchestration", type="sensor", name=name, **JOB)
               for name in ("pre_race_t60_sensor", "pre_race_t15_sensor", "post_race_t5_sensor")]
    for sensor in sensors:  # one request each, as Prometheus may split them: the group_wait gathers them
        alertmanager.post(sensor)
        time.sleep(0.3)
    [message] = alertmanager.wait_for("the firing message", lambda found: found)
    assert message.title == "[FIRING:3] InstigatorTicksFailing (racing_orchestration)"
    assert message.firing == {alert_key("InstigatorTicksFailing", location="racing_orchestration", type="sensor",
                                        name=name) for name in ("pre_race_t60_sensor", "pre_race_t15_sensor",
                                                                "post_race_t5_sensor")}
    assert "InstigatorTicksFailing summary" in message.text and "what to check" in message.text
    time.sleep(4)  # past a group_interval: an unchanged incident is not posted again
    assert len(alertmanager.messages()) == 1

    alertmanager.post(*[{**a, "endsAt": dt.datetime.now(dt.UTC).isoformat()} for a in sensors])
    found = alertmanager.wait_for("the resolved message", lambda found: len(found) == 2)
    assert found[1].title == "[RESOLVED] InstigatorTicksFailing (racing_orchestration)"
    assert found[1].resolved == message.firing and not found[1].firing


def test_a_down_daemon_inhibits_every_job_alert(alertmanager: RunningAlertmanager) -> None:
    # The daemon's alert first, as Prometheus sends it (the job alerts it causes come later): Alertmanager's
    # inhibitor reads the alert stream apart from the groups, so it must have seen the source before a group flushes.
    alertmanager.post(alert("DagsterDaemonDown", **PLATFORM))
    time.sleep(0.5)
    alertmanager.post(alert("InstigatorTicksFailing", location="maintenance_jobs", type="sensor",
                            name="maintenance_dispatcher", **JOB),
                      alert("TaskOverdue", location="maintenance_jobs", task="backup", executor="x", **JOB),
                      alert("JobOverdue", job="morning_scrape", location="racing_orchestration", **JOB))
    alertmanager.wait_for("the daemon's message", lambda found: found)
    time.sleep(4)
    assert [m.title for m in alertmanager.messages()] == ["[FIRING:1] DagsterDaemonDown"]


def test_a_down_code_server_inhibits_its_own_location_only(alertmanager: RunningAlertmanager) -> None:
    alertmanager.post(alert("CodeServerDown", location="racing_orchestration", **PLATFORM))
    time.sleep(0.5)
    alertmanager.post(alert("InstigatorTicksFailing", location="racing_orchestration", type="sensor",
                            name="pre_race_t15_sensor", **JOB),
                      alert("InstigatorTicksFailing", location="maintenance_jobs", type="sensor",
                            name="maintenance_dispatcher", **JOB))
    alertmanager.wait_for("two messages", lambda found: len(found) >= 2)
    time.sleep(4)
    titles = sorted(m.title for m in alertmanager.messages())
    assert titles == ["[FIRING:1] CodeServerDown (racing_orchestration)",
                      "[FIRING:1] InstigatorTicksFailing (maintenance_jobs)"]


def test_the_watchdog_has_its_own_route_and_no_resolved_message(alertmanager: RunningAlertmanager) -> None:
    watchdog = alert("Watchdog", severity="none", tier="watchdog")
    alertmanager.post(watchdog)
    [message] = alertmanager.wait_for("the watchdog message", lambda found: found)
    assert message.firing == {"Watchdog"}
    alertmanager.post({**watchdog, "endsAt": dt.datetime.now(dt.UTC).isoformat()})
    time.sleep(4)
    assert len(alertmanager.messages()) == 1  # send_resolved is off on its route
