"""`race_cards`: each racing day's card (meetings and races of every combination) as a daily-partitioned asset.

The morning scrape and the card refresh store cards every day and record the materializations themselves
(`card_days.record_card_days`); this asset is how a person (re)stores days on demand: the UI's Materialize button and
backfill dialog, `dagster asset materialize --partition-range`. It runs the morning scrape's own steps: one step per
(category, country, day), each fetched and upserted idempotently, a failed one tried again 30 minutes later at most
3 times (a past day TAB refuses with a 4xx is not retried), then the outcome tags of the audit trail.

A range is one run (BackfillPolicy.single_run: the CLI's --partition-range needs it, and a month is 180 small
steps, not 30 runs). Each day that stored meetings is materialized with its own counts and checked; a day that stored
nothing (TAB no longer serves it, or every combination failed) is not materialized, and the run fails at the end
naming each such day and why, so a backfill shows exactly those days as failed and the rest as done.
"""

import datetime as dt
from zoneinfo import ZoneInfo

import dagster as dg

from orchestration_core.run_config_rules import literal_config_schema
from orchestration_core.run_outcome import Outcome, record_outcome
from orchestration_core.settings import racing_timezone
from racing_orchestration.ingestion.card_days import record_card_days
from racing_orchestration.ingestion.combinations import (
    DEFAULT_CATEGORIES,
    DEFAULT_COUNTRIES,
    CombinationResult,
    DayOutcome,
    ScrapeCombination,
    plan_combinations,
    summarize,
)
from racing_orchestration.ingestion.jobs import (
    COMBINATION_MAX_RETRIES,
    COMBINATION_RETRY_DELAY_SECONDS,
    scrape_combination,
)
from racing_orchestration.race_data.card_checks import CARD_CHECK_SPECS
from racing_orchestration.race_data.catalog import GROUP, racing_days
from racing_orchestration.race_data.freshness import RACE_CARDS_FRESHNESS
from racing_orchestration.race_db.resource import RaceDatabase


class RaceCardConfig(dg.Config):
    """The launchpad's config of a race_cards materialization (mapped onto its steps)."""

    categories: list[str] = list(DEFAULT_CATEGORIES)
    countries: list[str] = list(DEFAULT_COUNTRIES)
    max_retries: int = COMBINATION_MAX_RETRIES
    retry_delay_seconds: float = COMBINATION_RETRY_DELAY_SECONDS
    # Today's empty combinations waited for like the morning scrape's (up to 3 x 30 min)? Off: a day stored on demand
    # is complete as TAB lists it now (a country without racing that day stays empty), and past days never fill.
    retry_empty: bool = False


class CardPlanConfig(dg.Config):
    categories: list[str] = list(DEFAULT_CATEGORIES)
    countries: list[str] = list(DEFAULT_COUNTRIES)


def _step_config(values: dict) -> dict:
    config = RaceCardConfig(**values)
    return {
        "plan_card_combinations": {"config": {"categories": config.categories, "countries": config.countries}},
        "scrape_combination": {"config": {"max_retries": config.max_retries,
                                          "retry_delay_seconds": config.retry_delay_seconds,
                                          "retry_empty": config.retry_empty,
                                          # record_race_cards records each stored day of the range, once per run
                                          "record_card_as_stored": False}},
    }


@dg.op(out=dg.DynamicOut(ScrapeCombination),
       description="Fan out one step per (category, country, racing day) of the partitions being materialized.",
       config_schema=literal_config_schema(CardPlanConfig))
def plan_card_combinations(context: dg.OpExecutionContext, race_db: RaceDatabase):
    config = CardPlanConfig(**context.op_config)
    race_db.engine()  # fail fast, naming `racing db upgrade`, before fanning out if the schema is behind
    days = [dt.date.fromisoformat(key) for key in context.partition_keys]
    try:
        combinations = plan_combinations(config.categories, config.countries, days)
    except ValueError as exc:
        raise dg.Failure(f"race_cards config is invalid: {exc}", allow_retries=False) from exc
    context.log.info(f"Scraping {len(combinations)} combinations for {len(days)} racing day(s): "
                     f"{days[0]}{f' to {days[-1]}' if len(days) > 1 else ''}")
    for combination in combinations:
        yield dg.DynamicOutput(combination, mapping_key=combination.key)


def asset_run_outcome(days: list[DayOutcome], failed_combinations: int, total: int) -> Outcome:
    """A race_cards run's outcome: failed when no day stored anything, partial when some day stored nothing or
    some combination failed for good, success otherwise."""
    stored = sum(d.stored for d in days)
    if not stored:
        return Outcome.FAILED
    if stored < len(days) or failed_combinations:
        return Outcome.PARTIAL
    return Outcome.SUCCESS if total else Outcome.FAILED


# The asset's data output is never yielded: each stored day is recorded by an explicit materialization with its own
# counts (a range's output would materialize every day of the range, stored or not), and the checks likewise.
_OUTS = {"result": dg.Out(dg.Nothing, is_required=False),
         **{spec.key.name: dg.Out(dg.Nothing, is_required=False) for spec in CARD_CHECK_SPECS}}


@dg.op(out=_OUTS, description="Record each racing day's stored card (materialization and checks) and the run's "
                               "outcome; fail naming every day that stored nothing.")
def record_race_cards(context: dg.OpExecutionContext, results: list[CombinationResult], race_db: RaceDatabase):
    now = dt.datetime.now(dt.UTC)
    days = record_card_days(context, results, race_db, now)
    summary = summarize(results)
    today = now.astimezone(ZoneInfo(racing_timezone())).date()
    reasons = [reason for day in days if (reason := day.reason(today))]
    outcome = asset_run_outcome(days, summary.failed, summary.combinations)
    stored = sum(d.stored for d in days)
    error = "; ".join(reasons) or "; ".join(f"{r.combination.key}: {r.error}" for r in results if r.error) or None
    record_outcome(context, outcome, stored, len(days) - stored, error)
    context.log.info(f"{stored} of {len(days)} racing day(s) stored: {summary.meetings} meetings, "
                     f"{summary.races} races, {summary.api_requests} API requests")
    if reasons:
        raise dg.Failure(
            f"{len(reasons)} of {len(days)} racing day(s) stored nothing:\n" + "\n".join(reasons),
            metadata={"days_stored": stored, "days_not_stored": len(reasons)}, allow_retries=False,
        )
    return
    yield  # a generator with nothing to yield: the outputs are optional (see _OUTS)


@dg.graph_asset(
    partitions_def=racing_days,
    backfill_policy=dg.BackfillPolicy.single_run(),
    group_name=GROUP,
    kinds={"postgres"},
    check_specs=CARD_CHECK_SPECS,
    config=dg.ConfigMapping(config_fn=_step_config, config_schema=literal_config_schema(RaceCardConfig)),
    description="Meetings and races of each racing day, stored in the race database. Materialized by the morning "
    "scrape (today and tomorrow), every card refresh (today) and on demand here; a range is one run with the morning "
    "scrape's per-combination steps, 30-minute retries and outcome tags.",
)
def race_cards():
    outs = record_race_cards(plan_card_combinations().map(scrape_combination).collect())
    return {"result": outs.result, **{f"race_cards_{spec.key.name}": getattr(outs, spec.key.name)
                                      for spec in CARD_CHECK_SPECS}}


# @graph_asset takes no FreshnessPolicy: attach it to the asset's spec.
race_cards = race_cards.map_asset_specs(lambda spec: spec.replace_attributes(freshness_policy=RACE_CARDS_FRESHNESS))
