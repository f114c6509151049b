"""The metric-name extraction the dashboard and alert checks rely on."""

from __future__ import annotations

import pytest

from tests.deploy.exported_metrics import EXPORTED_METRICS, series_names
from tests.deploy.promql import metric_names, unknown_metrics

pytestmark = pytest.mark.unit


@pytest.mark.parametrize(
    ("expr", "names"),
    [
        ("orchestration_runs", {"orchestration_runs"}),
        # Label names and values, grouping labels and Grafana variables are not metrics.
        ('sum by (job, outcome) (orchestration_runs{window="1h", outcome=~"failed|success", job=~"$job"})',
         {"orchestration_runs"}),
        # Functions are not metrics; ranges are not metrics.
        ("sum by (route) (rate(maintenance_api_requests_total[5m]))", {"maintenance_api_requests_total"}),
        ('histogram_quantile(0.95, sum by (job, le) (orchestration_run_duration_seconds_bucket{job=~"${job}"}))',
         {"orchestration_run_duration_seconds_bucket"}),
        # Both sides of a binary operation; numbers and `time()` are not metrics.
        ("(time() - orchestration_last_success_timestamp_seconds) > 25 * 3600 or maintenance_tasks_enabled",
         {"orchestration_last_success_timestamp_seconds", "maintenance_tasks_enabled"}),
        ("a / on(job) group_left(kind) b", {"a", "b"}),
        ("absent(up)", {"up"}),
        ('foo{le="1e3"} offset 5m', {"foo"}),
        ("count(bar) by (x)", {"bar"}),
    ],
)
def test_metric_names(expr: str, names: set[str]) -> None:
    assert metric_names(expr) == names


def test_unknown_metrics_catches_a_name_the_api_does_not_export() -> None:
    known = series_names()
    assert unknown_metrics('sum(orchestration_runs{window="1h"}) / sum(orchestration_run_total)', known) == {
        "orchestration_run_total"
    }
    assert unknown_metrics("up", known) == {"up"}
    assert not unknown_metrics("sum(orchestration_run_duration_seconds_count)", known)


def test_histogram_series_are_exported_with_their_suffixes() -> None:
    assert EXPORTED_METRICS["orchestration_run_duration_seconds"] == "histogram"
    assert {"orchestration_run_duration_seconds_bucket", "orchestration_run_duration_seconds_sum"} <= series_names()
    assert "orchestration_runs_bucket" not in series_names()
