"""What a card scrape stored, per racing day, recorded in the asset catalog: a materialization of `race_cards` for each
day it stored meetings for (with the counts), and the card checks of each day it scraped.

Shared by every run that stores cards: the morning scrape and the card refresh (their summary step) and the
race_cards asset itself (UI materializations, backfills, `dagster asset materialize`).

A morning scrape's combination may wait up to 3 x 30 minutes for its retries, and the summary step waits for it. So
that the catalog shows a day's card as it is stored, each combination that stores meetings also records the day at
once (`record_stored_combination`): a materialization with what the race database holds for the day so far, and the
checks that already hold. The summary step still records each day's full card and all its checks last.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Sequence
from zoneinfo import ZoneInfo

import dagster as dg

from orchestration_core.settings import racing_timezone
from racing_orchestration.ingestion.combinations import CombinationResult, DayOutcome, day_outcomes, results_markdown
from racing_orchestration.race_data.card_checks import (
    CardFacts,
    card_checks,
    card_facts,
    check_evaluations,
    checks_while_scraping,
    lock_card_day,
    record_card_checks,
)
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
            record_card_checks(context, race_db, outcome.day, now, tz)
    return outcomes


def stored_so_far_materialization(result: CombinationResult, facts: CardFacts,
                                  partition: str) -> dg.AssetMaterialization:
    """The day's card as one combination leaves it: the race database's counts for the day, and what it stored."""
    c = result.combination
    return dg.AssetMaterialization(
        asset_key=RACE_CARDS,
        partition=partition,
        description=f"{facts.meetings} meetings and {len(facts.races)} races stored for {facts.day} so far "
        f"({c.category}/{c.country} stored {result.meetings} meetings); the run's summary records the day's full card",
        metadata={
            "meetings": facts.meetings,
            "races": len(facts.races),
            "combination": c.key,
            "combination_meetings": result.meetings,
            "combination_races": result.races,
            "api_requests": result.api_requests,
            "attempts": result.attempts,
        },
    )


def record_stored_combination(context: dg.OpExecutionContext, result: CombinationResult, race_db: RaceDatabase,
                              now: dt.datetime | None = None) -> None:
    """Log the day's `race_cards` materialization and the checks that already hold, as soon as `result` stored
    meetings. Nothing for a combination that stored none, nor for a day outside the partitions (the summary step
    says so)."""
    partition = racing_day_key(result.combination.day)
    if not result.meetings or partition is None:
        return
    now = now or dt.datetime.now(dt.UTC)
    day = result.combination.day
    # Combinations of the same day store and record concurrently (the scrape's threads). Reading the day and logging
    # it under one lock per day keeps the catalog's latest materialization the one with the latest counts: otherwise
    # a combination that read the day first could log last and leave the smaller counts on top.
    with race_db.begin() as conn:
        lock_card_day(conn, day)
        facts = card_facts(conn, day)
        context.log_event(stored_so_far_materialization(result, facts, partition))
        for evaluation in check_evaluations(checks_while_scraping(card_checks(facts, now, racing_timezone())), day):
            context.log_event(evaluation)
