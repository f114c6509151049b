"""The control API's Prometheus metrics (the published interface of `GET /metrics`), by exposition name.

Dashboards and alert rules may reference only these. A histogram also exports `_bucket`, `_sum` and `_count`
series.
"""

from __future__ import annotations

EXPORTED_METRICS: dict[str, str] = {
    "orchestration_runs": "gauge",
    "orchestration_step_retries": "gauge",
    "orchestration_run_retries": "gauge",
    "orchestration_active_runs": "gauge",
    "orchestration_queued_runs": "gauge",
    "orchestration_run_duration_seconds": "histogram",
    "orchestration_items_processed": "gauge",
    "orchestration_items_failed": "gauge",
    "orchestration_last_success_timestamp_seconds": "gauge",
    "orchestration_daemon_heartbeat_age_seconds": "gauge",
    "orchestration_tab_api_requests": "gauge",
    "racing_day_completeness_ratio": "gauge",
    "racing_day_checkpoint_items": "gauge",
    "racing_day_check_passed": "gauge",
    "racing_day_check_timestamp_seconds": "gauge",
    "maintenance_tasks_enabled": "gauge",
    "maintenance_concurrent_limit": "gauge",
    "maintenance_api_requests_total": "counter",
    # What the alert rules compare against (issue 24, docs/alerts.md).
    "orchestration_run_retry_highest": "gauge",
    "orchestration_run_retry_limit": "gauge",
    "orchestration_step_retry_highest": "gauge",
    "orchestration_step_retry_limit": "gauge",
    "orchestration_instigator_running": "gauge",
    "orchestration_instigator_last_tick_timestamp_seconds": "gauge",
    "orchestration_instigator_failed_ticks_in_a_row": "gauge",
    "orchestration_instigator_interval_seconds": "gauge",
    "orchestration_instigator_tick_late_seconds": "gauge",
    "orchestration_instigator_last_error_info": "gauge",
    "orchestration_daemon_up": "gauge",
    "orchestration_daemon_starting": "gauge",
    "orchestration_code_server_up": "gauge",
    "orchestration_job_expected_interval_seconds": "gauge",
    "orchestration_job_grace_seconds": "gauge",
    "maintenance_task_last_success_timestamp_seconds": "gauge",
    "maintenance_task_created_timestamp_seconds": "gauge",
    "maintenance_task_expected_interval_seconds": "gauge",
    "maintenance_task_grace_seconds": "gauge",
    "maintenance_api_metrics_errors": "gauge",
    "maintenance_postgres_backup_databases": "gauge",
    "maintenance_postgres_backup_last_success_timestamp_seconds": "gauge",
}

_SERIES_SUFFIXES = {"histogram": ("_bucket", "_sum", "_count"), "counter": (), "gauge": ()}


def series_names(metrics: dict[str, str] = EXPORTED_METRICS) -> frozenset[str]:
    """Every series name a scrape of the API can contain."""
    names = set(metrics)
    for name, kind in metrics.items():
        names.update(name + suffix for suffix in _SERIES_SUFFIXES[kind])
    return frozenset(names)
