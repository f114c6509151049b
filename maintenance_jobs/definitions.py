"""Wiring of the maintenance_jobs code location."""

import orchestration_core.warning_filters  # noqa: F401 - first: silences known-harmless warnings
import dagster as dg

from maintenance_jobs.jobs import MAINTENANCE_JOBS
from maintenance_jobs.resources import maintenance_resources
from maintenance_jobs.sensors import MAINTENANCE_SENSORS
from orchestration_core.audit.alerts import alert_webhook_from_env

defs = dg.Definitions(
    jobs=MAINTENANCE_JOBS,
    # Each job is one op: run it in the run worker, not in a second process that loads the location again.
    executor=dg.in_process_executor,
    schedules=[],
    sensors=MAINTENANCE_SENSORS,
    resources={
        **maintenance_resources(),
        # The guard of runs lost to infrastructure reports through the same webhook as the failure alerts.
        "alert_webhook": alert_webhook_from_env(),
    },
)
