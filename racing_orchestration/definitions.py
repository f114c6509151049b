"""Wiring of the racing_orchestration code location."""

import orchestration_core.warning_filters  # noqa: F401 - first: silences known-harmless warnings
import dagster as dg

from orchestration_core.audit.alerts import (
    alert_webhook_from_env,
    partial_outcome_alert,
    run_failure_alert,
    scheduled_job_freshness,
)
from orchestration_core.audit.jobs import cleanup_job_runs, cleanup_job_runs_schedule
from racing_orchestration.checkpoints.jobs import post_race_t5, pre_race_t15, pre_race_t60
from racing_orchestration.checkpoints.movers import market_movers
from racing_orchestration.checkpoints.racing_day import (
    racing_day,
    racing_day_completeness,
    racing_day_completeness_sensor,
)
from racing_orchestration.checkpoints.sensors import post_race_t5_sensor, pre_race_t15_sensor, pre_race_t60_sensor
from racing_orchestration.export.asset import race_day_export
from racing_orchestration.ingestion.card_refresh import card_refresh, card_refresh_schedule
from racing_orchestration.ingestion.jobs import morning_scrape, morning_scrape_schedule
from racing_orchestration.ingestion.race_cards import race_cards
from racing_orchestration.race_data.automation import race_data_automation
from racing_orchestration.race_data.catalog import RACE_TIME_ASSETS
from racing_orchestration.race_data.freshness import race_data_freshness_alert
from racing_orchestration.resources import racing_resources
from racing_orchestration.threaded_executor import threadpool_executor

defs = dg.Definitions(
    jobs=[cleanup_job_runs, morning_scrape, card_refresh, pre_race_t60, pre_race_t15, post_race_t5,
          racing_day_completeness],
    schedules=[cleanup_job_runs_schedule, morning_scrape_schedule, card_refresh_schedule],
    sensors=[run_failure_alert, partial_outcome_alert, scheduled_job_freshness,
             pre_race_t60_sensor, pre_race_t15_sensor, post_race_t5_sensor, racing_day_completeness_sensor,
             race_data_automation(), race_data_freshness_alert],
    assets=[race_cards, *RACE_TIME_ASSETS, market_movers, racing_day, race_day_export],
    resources={**racing_resources(), "alert_webhook": alert_webhook_from_env()},
    # Jobs without an executor of their own (asset materializations and backfills, the cleanup) run their steps in
    # threads of the run worker: a month's race_cards backfill is 180 small I/O-bound steps, not 180 processes.
    executor=threadpool_executor,
)
