"""The provisioned Grafana dashboard: generated file up to date, structure, datasource, metric names (the API's
only, every query valid PromQL per promtool) and the drill-down links to the Dagster UI."""

from __future__ import annotations

import copy
import importlib.util
import json
import re
from pathlib import Path

import pytest
import yaml

from tests.deploy.compose_model import REPO_ROOT
from tests.deploy.exported_metrics import series_names
from tests.deploy.promql import unknown_metrics
from tests.deploy.test_prometheus import promtool

pytestmark = pytest.mark.unit

GRAFANA_DIR = REPO_ROOT / "deploy" / "grafana"
DASHBOARD_FILE = GRAFANA_DIR / "dashboards" / "orchestration.json"
PANEL_TYPES = {"stat", "timeseries", "table", "gauge", "bargauge", "text"}
_LABEL_VALUES = re.compile(r"^label_values\((?:(\w+)\s*,\s*)?\w+\)$")


def _load_builder():
    spec = importlib.util.spec_from_file_location("build_dashboard", GRAFANA_DIR / "build_dashboard.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def dashboard() -> dict:
    return json.loads(DASHBOARD_FILE.read_text())


def queries(board: dict) -> list[str]:
    """Every PromQL expression of the dashboard: panel targets and template variable queries."""
    exprs = [target["expr"] for panel in board["panels"] for target in panel["targets"]]
    for variable in board["templating"]["list"]:
        if variable["type"] == "query":
            match = _LABEL_VALUES.match(variable["query"]["query"])
            assert match and match.group(1), f"variable {variable['name']}: expected label_values(metric, label)"
            exprs.append(match.group(1))
    return exprs


def metric_problems(board: dict) -> list[str]:
    known = series_names()
    unknown = {expr: unknown_metrics(expr, known) for expr in queries(board)}
    return [f"{expr}: {sorted(names)}" for expr, names in unknown.items() if names]


def test_committed_dashboard_is_the_builder_output() -> None:
    assert DASHBOARD_FILE.read_text() == _load_builder().render(), "run deploy/grafana/build_dashboard.py"


def test_dashboard_structure() -> None:
    board = dashboard()
    assert board["uid"] and board["title"] and board["schemaVersion"] >= 36
    ids = [panel["id"] for panel in board["panels"]]
    assert len(ids) == len(set(ids))
    for panel in board["panels"]:
        assert panel["type"] in PANEL_TYPES, panel["title"]
        assert set(panel["gridPos"]) == {"x", "y", "w", "h"} and panel["gridPos"]["x"] + panel["gridPos"]["w"] <= 24
        refs = [target["refId"] for target in panel["targets"]]
        assert refs and len(refs) == len(set(refs)), panel["title"]


def test_every_query_uses_the_provisioned_datasource() -> None:
    provisioned = yaml.safe_load((GRAFANA_DIR / "provisioning" / "datasources" / "prometheus.yml").read_text())
    uid = provisioned["datasources"][0]["uid"]
    board = dashboard()
    for panel in board["panels"]:
        assert panel["datasource"]["uid"] == uid
        assert all(target["datasource"]["uid"] == uid for target in panel["targets"])
    dashboards = yaml.safe_load((GRAFANA_DIR / "provisioning" / "dashboards" / "orchestration.yml").read_text())
    assert dashboards["providers"][0]["options"]["path"] == "/var/lib/grafana/dashboards"


def test_every_query_references_only_exported_metrics() -> None:
    assert metric_problems(dashboard()) == []


def test_a_query_on_a_metric_the_api_does_not_export_is_caught() -> None:
    board = copy.deepcopy(dashboard())
    board["panels"][0]["targets"][0]["expr"] = "sum(orchestration_runs_total)"
    assert metric_problems(board) == ["sum(orchestration_runs_total): ['orchestration_runs_total']"]


def test_every_query_is_valid_promql(tmp_path: Path) -> None:
    # promtool parses each query as a recording rule; Grafana variables get values first.
    rules = [
        {"record": f"dashboard:query_{number}", "expr": expr.replace("${job}", ".*").replace("$job", ".*")}
        for number, expr in enumerate(queries(dashboard()))
    ]
    rules_file = tmp_path / "dashboard_queries.yml"
    rules_file.write_text(yaml.safe_dump({"groups": [{"name": "dashboard", "rules": rules}]}))
    result = promtool("check", "rules", str(rules_file))
    assert result.returncode == 0, result.stdout + result.stderr


@pytest.mark.parametrize(
    ("topic", "metric"),
    [
        ("success/failure rates", "orchestration_runs"),
        ("duration trends", "orchestration_run_duration_seconds_bucket"),
        ("retry frequency", "orchestration_step_retries"),
        ("items processed per hour", "orchestration_items_processed"),
        ("maintenance queue", "orchestration_queued_runs"),
        ("racing day completeness", "racing_day_completeness_ratio"),
        ("racing day gaps", "racing_day_checkpoint_items"),
    ],
)
def test_the_issue_panels_are_present(topic: str, metric: str) -> None:
    timeseries = [panel for panel in dashboard()["panels"] if panel["type"] == "timeseries"]
    assert any(metric in target["expr"] for panel in timeseries for target in panel["targets"]), topic


def test_failed_run_table_links_to_the_dagster_ui() -> None:
    board = dashboard()
    table = next(panel for panel in board["panels"] if panel["type"] == "table")
    assert all('outcome="failed"' in t["expr"] or 'outcome="partial"' in t["expr"] for t in table["targets"])
    job_column = next(o for o in table["fieldConfig"]["overrides"] if o["matcher"]["options"] == "job")
    links = job_column["properties"][0]["value"]
    urls = [link["url"] for link in links]
    assert urls[0] == "${dagster_ui_url}/runs?q%5B%5D=job%3A${__data.fields.job}&q%5B%5D=status%3AFAILURE"
    assert "tag%3Aracing%2Foutcome%3Dpartial" in urls[1]
    ui_variable = next(v for v in board["templating"]["list"] if v["name"] == "dagster_ui_url")
    assert ui_variable["query"] == "http://127.0.0.1:3000"  # the compose webserver's loopback address
