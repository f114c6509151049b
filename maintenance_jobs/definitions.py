"""Wiring of the maintenance_jobs code location."""

import dagster as dg

defs = dg.Definitions(
    jobs=[],
    schedules=[],
    sensors=[],
    resources={},
)
