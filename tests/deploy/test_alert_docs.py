"""docs/alerts.md against the rules: every alert documented (meaning, what to check first, how to silence), and the
timing table the live test holds the deployment to."""

from __future__ import annotations

import re

import pytest

from tests.deploy.alert_path import ALERTS_DOC, Promise, promises
from tests.deploy.test_prometheus import alert_rules

pytestmark = pytest.mark.unit


def sections() -> dict[str, str]:
    text = ALERTS_DOC.read_text()
    parts = re.split(r"^### (\w+)", text, flags=re.MULTILINE)
    return dict(zip(parts[1::2], parts[2::2], strict=True))


def test_every_rule_has_a_section_and_every_section_a_rule() -> None:
    assert set(sections()) == {rule["alert"] for rule in alert_rules()}


@pytest.mark.parametrize("rule", alert_rules(), ids=lambda rule: rule["alert"])
def test_each_section_says_what_it_means_what_to_check_and_how_to_silence(rule: dict) -> None:
    section = sections()[rule["alert"]]
    for part in ("**Means:**", "**Check first:**", "**Silence:**"):
        assert part in section, f"{rule['alert']}: no {part}"
    severity = rule["labels"]["severity"]
    if severity != "none":
        assert f"### {rule['alert']} ({severity})" in ALERTS_DOC.read_text()


def test_the_timing_table_promises_the_issues_faults() -> None:
    table = promises()
    assert set(table) == {"InstigatorTicksFailing", "CodeServerDown", "DagsterDaemonDown", "TaskOverdue"}
    assert table["InstigatorTicksFailing"].first_message_seconds <= 5 * 60  # issue 24: a broken sensor in 5 min
    assert all(p.resolved_seconds >= p.first_message_seconds for p in table.values())


def test_the_table_parser_reads_rows_only() -> None:
    text = "| alert | fault | a | b |\n|---|---|---|---|\n| X | it broke | 3 min | 9 min |\n| bad | row | x | y |\n"
    assert promises(text) == {"X": Promise(180.0, 540.0)}
