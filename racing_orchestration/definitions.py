"""Wiring of the racing_orchestration code location."""

import dagster as dg

defs = dg.Definitions(
    jobs=[],
    schedules=[],
    sensors=[],
    assets=[],
    resources={},
)
