"""Generate deploy/grafana/dashboards/orchestration.json, the provisioned Grafana dashboard.

Every query uses the control API's metrics only (README "Production"); tests/deploy checks the names and that the
committed JSON equals this script's output. Run `.venv/bin/python deploy/grafana/build_dashboard.py` after editing.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

OUTPUT = Path(__file__).resolve().parent / "dashboards" / "orchestration.json"
DATASOURCE = {"type": "prometheus", "uid": "orchestration-prometheus"}  # provisioning/datasources/prometheus.yml
FINISHED = 'outcome=~"success|partial|failed"'
FAILED = 'outcome="failed"'
DURATION_BUCKETS = 'sum by (job, le) (orchestration_run_duration_seconds_bucket{job=~"$job"})'
# Dagster UI run list filtered by job and status (legacy `q[]` filter tokens, still accepted by the 1.13 UI).
FAILED_RUNS_LINK = "${dagster_ui_url}/runs?q%5B%5D=job%3A${__data.fields.job}&q%5B%5D=status%3AFAILURE"
PARTIAL_RUNS_LINK = "${dagster_ui_url}/runs?q%5B%5D=job%3A${__data.fields.job}&q%5B%5D=tag%3Aracing%2Foutcome%3Dpartial"


def _target(expr: str, ref: str, legend: str = "", *, instant: bool = False, table: bool = False) -> dict[str, Any]:
    target: dict[str, Any] = {"datasource": DATASOURCE, "expr": expr, "refId": ref, "legendFormat": legend}
    if instant:
        target["instant"] = True
        target["range"] = False
    if table:
        target["format"] = "table"
    return target


def _panel(kind: str, title: str, grid: tuple[int, int, int, int], targets: list[dict[str, Any]], *,
           unit: str = "short", description: str = "", **extra: Any) -> dict[str, Any]:
    x, y, w, h = grid
    return {
        "type": kind,
        "title": title,
        "description": description,
        "datasource": DATASOURCE,
        "gridPos": {"x": x, "y": y, "w": w, "h": h},
        "targets": targets,
        "fieldConfig": {"defaults": {"unit": unit}, "overrides": extra.pop("overrides", [])},
        "options": extra.pop("options", {}),
        **extra,
    }


def _drilldown_table(y: int) -> dict[str, Any]:
    """Failed and partial runs of the last 24 h per job; the job cell links to those runs in the Dagster UI."""
    targets = [
        _target(f'sum by (job) (orchestration_runs{{window="24h", outcome="failed", job=~"$job"}})', "A",
                instant=True, table=True),
        _target(f'sum by (job) (orchestration_runs{{window="24h", outcome="partial", job=~"$job"}})', "B",
                instant=True, table=True),
    ]
    link_override = {
        "matcher": {"id": "byName", "options": "job"},
        "properties": [{"id": "links", "value": [
            {"title": "Failed runs of ${__data.fields.job} in the Dagster UI", "url": FAILED_RUNS_LINK,
             "targetBlank": True},
            {"title": "Partial runs of ${__data.fields.job} in the Dagster UI", "url": PARTIAL_RUNS_LINK,
             "targetBlank": True},
        ]}],
    }
    return _panel(
        "table", "Failed runs (24 h) — drill down to the Dagster UI", (0, y, 24, 8), targets,
        description="Jobs with failed or partial runs in the last 24 hours. Click a job to open its failed "
                    "(or partial) runs in the Dagster UI (set the dashboard's `Dagster UI` variable to the "
                    "address you use).",
        overrides=[link_override],
        transformations=[
            {"id": "merge", "options": {}},
            {"id": "organize", "options": {
                "excludeByName": {"Time": True},
                "renameByName": {"Value #A": "failed runs (24 h)", "Value #B": "partial runs (24 h)"},
            }},
            {"id": "filterByValue", "options": {
                "type": "exclude", "match": "all",
                "filters": [
                    {"fieldName": "failed runs (24 h)", "config": {"id": "lowerOrEqual", "options": {"value": 0}}},
                    {"fieldName": "partial runs (24 h)", "config": {"id": "lowerOrEqual", "options": {"value": 0}}},
                ],
            }},
        ],
        options={"showHeader": True, "sortBy": [{"displayName": "failed runs (24 h)", "desc": True}]},
    )


def panels() -> list[dict[str, Any]]:
    runs = 'orchestration_runs{{window="{window}", {outcome}, job=~"$job"}}'
    return [
        _panel("stat", "Runs finished (24 h)", (0, 0, 6, 4),
               [_target(f"sum({runs.format(window='24h', outcome=FINISHED)})", "A", instant=True)]),
        _panel("stat", "Failure rate (1 h)", (6, 0, 6, 4), [_target(
            f"sum({runs.format(window='1h', outcome=FAILED)}) / "
            f"sum({runs.format(window='1h', outcome=FINISHED)})", "A", instant=True)], unit="percentunit"),
        _panel("stat", "Maintenance queue", (12, 0, 6, 4), [
            _target('sum(orchestration_queued_runs{kind="maintenance"})', "A", "queued", instant=True),
            _target("maintenance_concurrent_limit", "B", "limit", instant=True),
        ]),
        _panel("stat", "Oldest daemon heartbeat", (18, 0, 6, 4), [
            _target("max(orchestration_daemon_heartbeat_age_seconds)", "A", instant=True)], unit="s"),
        _panel("timeseries", "Runs by outcome (1 h window)", (0, 4, 12, 8), [_target(
            f'sum by (outcome) ({runs.format(window="1h", outcome=FINISHED)})', "A", "{{outcome}}")],
            description="Runs that finished in the hour before each point, by outcome."),
        _panel("timeseries", "Failure rate by job (1 h window)", (12, 4, 12, 8), [_target(
            f"sum by (job) ({runs.format(window='1h', outcome=FAILED)}) / "
            f"sum by (job) ({runs.format(window='1h', outcome=FINISHED)})", "A", "{{job}}")],
            unit="percentunit", description="Alert JobFailureRateHigh fires above 10% for 5 minutes."),
        _panel("timeseries", "Run duration (runs finished in the last 24 h)", (0, 12, 12, 8), [
            _target(f"histogram_quantile(0.5, {DURATION_BUCKETS})", "A", "{{job}} p50"),
            _target(f"histogram_quantile(0.95, {DURATION_BUCKETS})", "B", "{{job}} p95"),
        ], unit="s"),
        _panel("timeseries", "Retries (1 h window)", (12, 12, 12, 8), [
            _target('sum by (job) (orchestration_step_retries{window="1h", job=~"$job"})', "A", "{{job}} step retries"),
            _target('sum by (job) (orchestration_run_retries{window="1h", job=~"$job"})', "B",
                    "{{job}} run re-executions"),
        ], description="Step retries (retry policies, RetryRequested) and run-level re-executions of crashed runs."),
        _drilldown_table(20),
        _panel("timeseries", "Items processed per hour", (0, 28, 12, 8), [
            _target('sum by (job) (orchestration_items_processed{window="1h", job=~"$job"})', "A", "{{job}} processed"),
            _target('sum by (job) (orchestration_items_failed{window="1h", job=~"$job"})', "B", "{{job}} failed"),
        ], description="Sum of the racing/items_processed and racing/items_failed run tags over the last hour."),
        _panel("timeseries", "Maintenance queue and active runs", (12, 28, 12, 8), [
            _target("sum by (kind) (orchestration_queued_runs)", "A", "queued {{kind}}"),
            _target('sum(orchestration_active_runs{job=~"$job"})', "B", "active runs"),
            _target("maintenance_concurrent_limit", "C", "maintenance limit"),
            _target("maintenance_tasks_enabled", "D", "tasks enabled"),
        ]),
        _panel("timeseries", "TAB API requests (1 h window)", (0, 36, 12, 8), [_target(
            'sum by (endpoint, outcome) (orchestration_tab_api_requests{window="1h"})', "A",
            "{{endpoint}} {{outcome}}")]),
        _panel("timeseries", "Control API requests", (12, 36, 12, 8), [_target(
            "sum by (route, status) (rate(maintenance_api_requests_total[5m]))", "A", "{{route}} {{status}}")],
            unit="reqps"),
        _panel("timeseries", "Racing day completeness (latest checked day)", (0, 44, 12, 8), [_target(
            "max by (check, day) (racing_day_completeness_ratio)", "A", "{{day}} {{check}}")],
            unit="percentunit",
            description="Share of the day's expected items captured or explained by a recorded reason: T-60 and "
                        "T-15 snapshots of every started race, Final (or flagged provisional) results of every "
                        "finished race. From the racing_day asset checks, run once the day's last race has "
                        "settled; the gaps are listed in the checks' metadata in the Dagster UI."),
        _panel("timeseries", "Racing day gaps (latest checked day)", (12, 44, 12, 8), [_target(
            'sum by (check, day, class) (racing_day_checkpoint_items{class=~"missing|pending"})', "A",
            "{{day}} {{check}} {{class}}")],
            description="Items with neither data nor a recorded reason (missing) or not settled (pending). "
                        "Alert RacingDayIncomplete fires while any is above 0."),
    ]


def dashboard() -> dict[str, Any]:
    return {
        "uid": "racing-orchestration",
        "title": "Racing & maintenance orchestration",
        "tags": ["dagster", "orchestration"],
        "timezone": "browser",
        "schemaVersion": 39,
        "version": 1,
        "editable": False,
        "refresh": "1m",
        "time": {"from": "now-24h", "to": "now"},
        "templating": {"list": [
            {"name": "job", "label": "Job", "type": "query", "datasource": DATASOURCE,
             "query": {"query": "label_values(orchestration_runs, job)", "refId": "job"},
             "definition": "label_values(orchestration_runs, job)",
             "includeAll": True, "multi": True, "allValue": ".*", "refresh": 2, "sort": 1,
             "current": {"text": "All", "value": "$__all"}},
            {"name": "dagster_ui_url", "label": "Dagster UI", "type": "textbox",
             "query": "http://127.0.0.1:3000", "current": {"text": "http://127.0.0.1:3000",
                                                           "value": "http://127.0.0.1:3000"}},
        ]},
        "panels": [{"id": number, **panel} for number, panel in enumerate(panels(), start=1)],
    }


def render() -> str:
    return json.dumps(dashboard(), indent=2, ensure_ascii=False) + "\n"


def main() -> int:
    OUTPUT.write_text(render())
    print(f"wrote {OUTPUT}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
