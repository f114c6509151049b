"""What a card scrape stored, per racing day, recorded in the asset catalog: a materialization of `race_cards` for each
day it stored meetings for (with the counts), and the card checks of each day it scraped.

Shared by every run that stores cards: the morning scrape and the card refresh (their summary step) and the
race_cards asset itself (UI materializations, backfills, `dagster asset materialize`).
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Sequence
from zoneinfo import ZoneInfo

import dagster as dg

from orchestration_core.settings import racing_timezone
from racing_orchestration.ingestion.combinations import CombinationResult, DayOutcome, day_outcomes, results_markdown
from racing_orchestration.race_data.card_checks import card_checks, card_facts, check_evaluations
from racing_orchestration.race_data.catalog import RACE_CARDS, log_materialization, racing_day_key
from racing_orchestration.race_db.resource import RaceDatabase


def card_materialization(outcome: DayOutcome, partition: str,
                         results: Sequence[CombinationResult]) -> dg.AssetMaterialization:
    """The day's stored card as a materialization: what this run stored, and each combination's result."""
    return dg.AssetMaterialization(
        asset_key=RACE_CARDS,
        partition=partition,
        description=f"{outcome.meetings} meetings and {outcome.races} races stored for {outcome.day}"
        + (f"; {outcome.failed} of {outcome.combinations} combinations failed" if outcome.failed else ""),
        metadata={
            "meetings": outcome.meetings,
            "races": outcome.races,
            "ok_combinations": outcome.ok,
            "empty_combinations": outcome.empty,
            "failed_combinations": outcome.failed,
            "api_requests": outcome.api_requests,
            "combinations": dg.MetadataValue.md(results_markdown(results)),
            **({"errors": dg.MetadataValue.md("\n".join(f"- {e}" for e in outcome.errors))} if outcome.errors else {}),
        },
    )


def record_card_days(context: dg.OpExecutionContext, results: Sequence[CombinationResult],
                     race_db: RaceDatabase, now: dt.datetime | None = None) -> list[DayOutcome]:
    """Log the run's `race_cards` materializations and card check evaluations; returns each day's outcome.

    A day with nothing stored gets no materialization (the catalog keeps showing when data last arrived), but today's
    and past days are still checked: an empty card once the scrape is done is what `card_not_empty` reports."""
    now = now or dt.datetime.now(dt.UTC)
    tz = racing_timezone()
    today = now.astimezone(ZoneInfo(tz)).date()
    outcomes = day_outcomes(results)
    for outcome in outcomes:
        partition = racing_day_key(outcome.day)
        if outcome.stored:
            of_day = [r for r in results if r.combination.day == outcome.day]
            event = card_materialization(outcome, partition, of_day) if partition is not None else None
            log_materialization(context, event, f"race_cards of {outcome.day}")
        if partition is not None and (outcome.stored or outcome.day <= today):
            with race_db.connect() as conn:
                facts = card_facts(conn, outcome.day)
            for evaluation in check_evaluations(card_checks(facts, now, tz), outcome.day):
                context.log_event(evaluation)
    return outcomes
