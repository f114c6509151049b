"""Each code location loads, and names every job, schedule, sensor and asset operators rely on."""

import dagster as dg
import pytest


@pytest.mark.unit
def test_racing_orchestration_definitions_load(monkeypatch) -> None:
    from racing_orchestration.definitions import defs

    for job in ("morning_scrape", "card_refresh", "pre_race_t60", "pre_race_t15", "post_race_t5", "cleanup_job_runs"):
        assert defs.resolve_job_def(job).name == job
    crons = {name: defs.resolve_schedule_def(name)
             for name in ("morning_scrape_schedule", "cleanup_job_runs_schedule", "card_refresh_schedule")}
    assert crons["morning_scrape_schedule"].cron_schedule == "0 6 * * *"
    assert crons["card_refresh_schedule"].cron_schedule == "*/30 7-23 * * *"
    assert crons["cleanup_job_runs_schedule"].cron_schedule == "0 2 * * *"
    for schedule in crons.values():
        assert schedule.default_status == dg.DefaultScheduleStatus.RUNNING
        assert schedule.execution_timezone == "Pacific/Auckland"
    for name in ("pre_race_t60_sensor", "pre_race_t15_sensor", "post_race_t5_sensor", "run_failure_alert",
                 "partial_outcome_alert", "scheduled_job_freshness", "race_data_automation",
                 "race_data_freshness_alert"):
        sensor = defs.resolve_sensor_def(name)
        assert sensor.default_status == dg.DefaultSensorStatus.RUNNING, name
        assert sensor.minimum_interval_seconds is None or sensor.minimum_interval_seconds <= 300, name
    for name in ("pre_race_t60_sensor", "pre_race_t15_sensor", "post_race_t5_sensor"):
        assert defs.resolve_sensor_def(name).minimum_interval_seconds <= 30  # race-time accuracy needs <= 30 s
    for asset in ("race_cards", "market_movers", "race_day_export", "racing_day"):
        assert defs.resolve_assets_def(asset).partitions_def is not None
        assert defs.resolve_assets_def(asset).backfill_policy is not None or asset == "racing_day"
    assert dg.Definitions.validate_loadable(defs) is None


@pytest.mark.unit
def test_maintenance_jobs_definitions_load() -> None:
    from maintenance_jobs.definitions import defs

    for job in ("example_executor", "doc_sync_executor", "config_backup_executor", "postgres_backup_executor",
                "plugin_executor"):
        assert defs.resolve_job_def(job).tags.get("orchestration/kind") == "maintenance", job
    dispatcher = defs.resolve_sensor_def("maintenance_dispatcher")
    assert dispatcher.minimum_interval_seconds == 60
    assert dispatcher.default_status == dg.DefaultSensorStatus.RUNNING
    assert dg.Definitions.validate_loadable(defs) is None


@pytest.mark.unit
def test_racing_module_exposes_definitions_for_the_cli() -> None:
    # `dagster asset materialize -m racing_orchestration --select race_cards --partition D` loads this module.
    import racing_orchestration

    assert isinstance(racing_orchestration.defs, dg.Definitions)
