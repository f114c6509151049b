"""Wiring of the racing_orchestration code location."""

import dagster as dg

from racing_orchestration.ingestion.jobs import morning_scrape, morning_scrape_schedule
from racing_orchestration.ingestion.race_cards import race_cards
from racing_orchestration.resources import racing_resources

defs = dg.Definitions(
    jobs=[morning_scrape],
    schedules=[morning_scrape_schedule],
    sensors=[],
    assets=[race_cards],
    resources=racing_resources(),
)
