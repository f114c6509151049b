"""`race_cards`: the day's race card (meetings and races of every combination) as a daily-partitioned asset."""

import datetime as dt

import dagster as dg

from racing_orchestration.ingestion.combinations import (
    DEFAULT_CATEGORIES,
    DEFAULT_COUNTRIES,
    plan_combinations,
    results_markdown,
    summarize,
)
from racing_orchestration.ingestion.scrape import scrape_combination_once
from racing_orchestration.race_db.resource import RaceDatabase
from racing_orchestration.race_data.catalog import racing_days
from racing_orchestration.tab.client import TabClient

# The racing days (racing_orchestration/race_data/catalog.py), by the name the modules and tests knew them by.
race_card_partitions = racing_days


class RaceCardConfig(dg.Config):
    categories: list[str] = list(DEFAULT_CATEGORIES)
    countries: list[str] = list(DEFAULT_COUNTRIES)


@dg.asset(
    partitions_def=race_card_partitions,
    group_name="racing",
    kinds={"postgres"},
    description="Meetings and races of one racing day (meeting-local date), stored in the race database.",
    retry_policy=dg.RetryPolicy(max_retries=2, delay=60),
)
def race_cards(context: dg.AssetExecutionContext, config: RaceCardConfig, tab_client: TabClient,
               race_db: RaceDatabase) -> dg.MaterializeResult:
    day = dt.date.fromisoformat(context.partition_key)
    results = [
        scrape_combination_once(tab_client, race_db, combination, context.run_id)
        for combination in plan_combinations(config.categories, config.countries, [day])
    ]
    summary = summarize(results)
    return dg.MaterializeResult(
        metadata={
            "meetings": summary.meetings,
            "races": summary.races,
            "empty_combinations": summary.empty,
            "api_requests": summary.api_requests,
            "combinations": dg.MetadataValue.md(results_markdown(results)),
        }
    )
