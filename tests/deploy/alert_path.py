"""The alert path's files as tests use them: the production Alertmanager and Prometheus configurations with shorter
timings (nothing else changed), and the Slack messages Alertmanager posts, parsed back into alerts.

A message (deploy/alertmanager/slack.tmpl) has one attachment whose text holds one line per alert:
`FIRING <alertname> <label>=<value> ...: <summary>` or `RESOLVED ...`, the key before the colon identifying the alert.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path

import yaml

from tests.deploy.compose_model import REPO_ROOT

ALERTMANAGER_DIR = REPO_ROOT / "deploy" / "alertmanager"
ALERTMANAGER_CONFIG = ALERTMANAGER_DIR / "alertmanager.yml"
PROMETHEUS_DIR = REPO_ROOT / "deploy" / "prometheus"
_LINE = re.compile(r"^(FIRING|RESOLVED) (\S+(?: [A-Za-z_][A-Za-z0-9_]*=\S*)*): ")


def alertmanager_config(target_dir: Path, *, group_wait: str, group_interval: str, url_file: str | None = None,
                        repeat_interval: str | None = None) -> Path:
    """The production alertmanager.yml (and its template) under `target_dir` with other grouping timings and, for a
    process outside the container, another api_url_file. Routes, grouping keys and inhibitions are unchanged."""
    config = yaml.safe_load(ALERTMANAGER_CONFIG.read_text())
    config["route"]["group_wait"] = group_wait
    config["route"]["group_interval"] = group_interval
    if repeat_interval:
        config["route"]["repeat_interval"] = repeat_interval
    for receiver in config["receivers"]:
        for slack in receiver.get("slack_configs", []):
            if url_file:
                slack["api_url_file"] = url_file
    target_dir.mkdir(parents=True, exist_ok=True)
    (target_dir / "slack.tmpl").write_text((ALERTMANAGER_DIR / "slack.tmpl").read_text())
    path = target_dir / "alertmanager.yml"
    path.write_text(yaml.safe_dump(config, sort_keys=False))
    return path


def prometheus_config(target_dir: Path, *, interval: str, api_target: str | None = None) -> Path:
    """The production prometheus.yml and alerts.yml under `target_dir`, scraping and evaluating every `interval`
    (the rules, their `for:` durations and thresholds unchanged). `api_target`: scrape only the control API, there,
    and send alerts nowhere (a Prometheus on this host, outside the compose network)."""
    config = yaml.safe_load((PROMETHEUS_DIR / "prometheus.yml").read_text())
    if interval != config["global"]["scrape_interval"]:
        config["global"] = {"scrape_interval": interval, "evaluation_interval": interval, "scrape_timeout": interval}
        for job in config["scrape_configs"]:
            job.pop("scrape_timeout", None)  # must not exceed the interval
    if api_target:
        config.pop("alerting")
        config["scrape_configs"] = [job for job in config["scrape_configs"] if job["job_name"] == "control-api"]
        config["scrape_configs"][0]["static_configs"] = [{"targets": [api_target]}]
    target_dir.mkdir(parents=True, exist_ok=True)
    (target_dir / "alerts.yml").write_text((PROMETHEUS_DIR / "alerts.yml").read_text())
    path = target_dir / "prometheus.yml"
    path.write_text(yaml.safe_dump(config, sort_keys=False))
    return path


@dataclass(frozen=True)
class AlertMessage:
    received_at: float
    title: str
    firing: frozenset[str]
    resolved: frozenset[str]
    text: str = field(repr=False)

    @property
    def group(self) -> str:
        """The title without its status: "[FIRING:2] X (loc)" and "[RESOLVED] X (loc)" are the same group."""
        return self.title.split("] ", 1)[-1]


def parse_alert_message(stored: dict) -> AlertMessage | None:
    """A post from Alertmanager (Slack attachments), or None for another sender (the sensors post `blocks`)."""
    body = stored.get("body")
    if not isinstance(body, dict) or not body.get("attachments"):
        return None
    attachment = body["attachments"][0]
    text = attachment.get("text", "")
    firing, resolved = set(), set()
    for line in text.splitlines():
        if match := _LINE.match(line):
            (firing if match.group(1) == "FIRING" else resolved).add(match.group(2))
    return AlertMessage(stored["received_at"], attachment.get("title", ""), frozenset(firing), frozenset(resolved),
                        text)


def alert_messages(stored: list[dict]) -> list[AlertMessage]:
    return [m for m in map(parse_alert_message, stored) if m is not None]


def alert_key(alertname: str, **labels: str) -> str:
    """The key a message line names an alert by (labels sorted, severity and tier left out, as slack.tmpl does)."""
    return " ".join([alertname, *(f"{k}={v}" for k, v in sorted(labels.items()))])


ALERTS_DOC = REPO_ROOT / "docs" / "alerts.md"
_PROMISE_ROW = re.compile(r"^\| (\w+) \| [^|]+ \| (\d+) min \| (\d+) min \|$")


@dataclass(frozen=True)
class Promise:
    first_message_seconds: float
    resolved_seconds: float


def promises(text: str | None = None) -> dict[str, Promise]:
    """docs/alerts.md's timing table: alert -> the minutes it promises to the first message and to "resolved"."""
    found = {}
    for line in (ALERTS_DOC.read_text() if text is None else text).splitlines():
        if match := _PROMISE_ROW.match(line.strip()):
            found[match.group(1)] = Promise(int(match.group(2)) * 60.0, int(match.group(3)) * 60.0)
    return found
