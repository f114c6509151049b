"""The `morning_scrape` job: one step per (category, country, date) combination, run concurrently in threads."""

import datetime as dt

import dagster as dg
import sqlalchemy as sa

from orchestration_core.run_config_rules import literal_config_schema
from racing_orchestration.ingestion.combinations import (
    DEFAULT_CATEGORIES,
    DEFAULT_COUNTRIES,
    CombinationResult,
    ScrapeCombination,
    parse_days,
    plan_combinations,
    results_markdown,
    retries_after_error,
    retries_when_empty,
    scrape_days,
    summarize,
)
from racing_orchestration.ingestion.card_days import record_card_days, record_stored_combination
from racing_orchestration.ingestion.scrape import scrape_combination_once
from racing_orchestration.race_db.resource import RaceDatabase
from orchestration_core.run_outcome import KIND_RACING, TAG_KIND, Outcome, record_outcome
from orchestration_core.settings import racing_timezone
from racing_orchestration.tab.client import TabApiError, TabClient, TabTransientError
from racing_orchestration.tab.models import TabPayloadError
from racing_orchestration.threaded_executor import threadpool_executor

# The old scheduler's rule: a failed combination is tried again 30 minutes later, at most 3 times. Today's empty
# combinations are tried again the same way (TAB may publish the card after 06:00) and end `empty` if still empty.
COMBINATION_RETRY_DELAY_SECONDS = 1800
COMBINATION_MAX_RETRIES = 3


class ScrapePlanConfig(dg.Config):
    categories: list[str] = list(DEFAULT_CATEGORIES)
    countries: list[str] = list(DEFAULT_COUNTRIES)
    dates: list[str] = []  # YYYY-MM-DD; empty means today and the next `days_ahead` days in RACING_TIMEZONE
    days_ahead: int = 1


class CombinationRetryConfig(dg.Config):
    retry_delay_seconds: float = COMBINATION_RETRY_DELAY_SECONDS
    max_retries: int = COMBINATION_MAX_RETRIES
    # Today's empty card is tried again like a failed one (TAB may publish it after 06:00). Off for a partial card
    # known to be complete, e.g. the simulated feed's dense mode, which races in only some combinations.
    retry_empty: bool = True
    # Each combination that stores meetings records the day's race_cards materialization and checks at once, so the
    # catalog shows the card while other combinations wait for their retries (the summary step waits for them all).
    # Only where a combination may wait (max_retries > 0): without retries the summary follows the last fetch at once.
    # Off in the race_cards asset, whose record step records each day of the run (a backfill reads those).
    record_card_as_stored: bool = True


@dg.op(out=dg.DynamicOut(ScrapeCombination), description="Fan out one step per (category, country, date).",
       config_schema=literal_config_schema(ScrapePlanConfig))
def plan_scrape_combinations(context: dg.OpExecutionContext, race_db: RaceDatabase):
    config = ScrapePlanConfig(**context.op_config)
    race_db.engine()  # fail fast, naming `racing db upgrade`, before fanning out if the schema is behind
    try:
        if config.days_ahead < 0:
            raise ValueError(f"days_ahead: must be 0 or more, got {config.days_ahead}")
        days = parse_days(config.dates) or scrape_days(dt.datetime.now(dt.UTC), racing_timezone(), config.days_ahead)
        combinations = plan_combinations(config.categories, config.countries, days)
    except ValueError as exc:
        raise dg.Failure(f"morning_scrape config is invalid: {exc}", allow_retries=False) from exc
    context.log.info(f"Scraping {len(combinations)} combinations for {', '.join(map(str, days))}")
    for combination in combinations:
        yield dg.DynamicOutput(combination, mapping_key=combination.key)


@dg.op(
    # Declared so the UI shows the policy; the op raises RetryRequested itself so tests can shorten the delay,
    # so today's empty combinations are retried too, and so the last attempt can give up gracefully (a failed
    # combination must not fail the other ones; a still-empty one ends `empty`).
    retry_policy=dg.RetryPolicy(max_retries=COMBINATION_MAX_RETRIES, delay=COMBINATION_RETRY_DELAY_SECONDS),
    description="Fetch one combination's meetings from the TAB API and store them; record the day's race_cards as "
                "stored so far.",
    config_schema=literal_config_schema(CombinationRetryConfig),
)
def scrape_combination(
    context: dg.OpExecutionContext,
    combination: ScrapeCombination,
    tab_client: TabClient,
    race_db: RaceDatabase,
) -> CombinationResult:
    config = CombinationRetryConfig(**context.op_config)
    attempt = context.retry_number
    try:
        result = scrape_combination_once(tab_client, race_db, combination, context.run_id)
    except (TabApiError, TabPayloadError) as exc:
        transient = isinstance(exc, (TabTransientError, TabPayloadError))
        if attempt < config.max_retries and retries_after_error(combination.day, dt.datetime.now(dt.UTC),
                                                                 racing_timezone(), transient):
            context.log.warning(f"{combination.key} failed (attempt {attempt + 1}): {exc}; "
                                f"retrying in {config.retry_delay_seconds:.0f} s")
            raise dg.RetryRequested(max_retries=config.max_retries, seconds_to_wait=config.retry_delay_seconds) from exc
        why = "for good" if attempt >= config.max_retries else "at once (a past day TAB refuses: not retried)"
        context.log.error(f"{combination.key} failed {why} after {attempt + 1} attempts: {exc}")
        result = CombinationResult(combination, "failed", attempts=attempt + 1, error=str(exc),
                                   http_status=getattr(exc, "status_code", None))
    else:
        result = result._replace(attempts=attempt + 1)
        if (result.status == "empty" and config.retry_empty and attempt < config.max_retries
                and retries_when_empty(combination.day, dt.datetime.now(dt.UTC), racing_timezone())):
            # Its call is already in the scrapes table; an empty card is not an error, so no exception is chained.
            context.log.info(f"{combination.key} has no meetings yet (attempt {attempt + 1}); "
                             f"trying again in {config.retry_delay_seconds:.0f} s")
            raise dg.RetryRequested(max_retries=config.max_retries, seconds_to_wait=config.retry_delay_seconds)
    if config.record_card_as_stored and config.max_retries > 0:
        try:
            record_stored_combination(context, result, race_db)
        except sa.exc.SQLAlchemyError as exc:  # the card is stored; only the catalog's view of it could not be read
            context.log.error(f"race_cards of {combination.day} not recorded yet: the race database could not be read "
                              f"({exc}); the summary step records it")
    context.add_output_metadata(
        {"status": result.status, "meetings": result.meetings, "races": result.races,
         "api_requests": result.api_requests, "attempts": result.attempts, "error": result.error or ""}
    )
    return result


@dg.op(description="Record the run's outcome (success / partial / failed) and its counts in the audit trail, and "
                   "each racing day's stored card (race_cards materialization and card checks) in the asset catalog.")
def summarize_scrape(context: dg.OpExecutionContext, results: list[CombinationResult], race_db: RaceDatabase) -> dict:
    summary = summarize(results)
    failed = [r for r in results if r.status == "failed"]
    error = "; ".join(f"{r.combination.key}: {r.error}" for r in failed) or None
    record_outcome(context, summary.outcome, summary.ok + summary.empty, summary.failed, error)
    try:
        record_card_days(context, results, race_db)
    except sa.exc.SQLAlchemyError as exc:  # the cards are stored; only their checks could not be read back
        context.log.error(f"race_cards checks not evaluated: the race database could not be read ({exc})")
    metadata = {**summary._asdict(), "outcome": summary.outcome.value,
                "combinations_table": dg.MetadataValue.md(results_markdown(results))}
    context.add_output_metadata(metadata)
    if summary.outcome == Outcome.FAILED:
        raise dg.Failure(f"every combination failed: {error}", metadata={"failed": summary.failed})
    return {k: (v.value if isinstance(v, Outcome) else v) for k, v in summary._asdict().items()}


@dg.job(
    # Combinations are I/O-bound: up to 8 run at once (run config `execution.config.max_concurrent` tunes it).
    executor_def=threadpool_executor,
    tags={TAG_KIND: KIND_RACING},
    description="06:00 scrape of the day's meetings and races (today and tomorrow) into the race database.",
)
def morning_scrape():
    summarize_scrape(plan_scrape_combinations().map(scrape_combination).collect())


def morning_scrape_run_config(
    days: list[dt.date] | None = None,
    *,
    categories: list[str] | None = None,
    countries: list[str] | None = None,
    max_retries: int | None = None,
    max_concurrent: int | None = None,
) -> dict:
    """morning_scrape's run config: the one builder for the schedule, `racing scrape` (queued or in-process) and the
    benches. What is left out keeps the job's default (today and tomorrow, every category and country, the 30-minute
    retries, 8 combinations at once)."""
    plan: dict = {}
    if days:
        plan["dates"] = [d.isoformat() for d in days]
    if categories:
        plan["categories"] = categories
    if countries:
        plan["countries"] = countries
    ops: dict = {"plan_scrape_combinations": {"config": plan}}
    if max_retries is not None:
        ops["scrape_combination"] = {"config": {"max_retries": max_retries}}
    run_config: dict = {"ops": ops}
    if max_concurrent is not None:
        run_config["execution"] = {"config": {"max_concurrent": max_concurrent}}
    return run_config


@dg.schedule(
    cron_schedule="0 6 * * *",
    job=morning_scrape,
    execution_timezone=racing_timezone(),
    default_status=dg.DefaultScheduleStatus.RUNNING,
    description="Scrape today's and tomorrow's meetings at 06:00 racing time.",
)
def morning_scrape_schedule(context: dg.ScheduleEvaluationContext) -> dg.RunRequest:
    # Dates come from the scheduled time, not the wall clock, so a late (caught-up) run scrapes the right day.
    days = scrape_days(context.scheduled_execution_time, racing_timezone())
    return dg.RunRequest(run_config=morning_scrape_run_config(days), tags={"racing/scrape_day": days[0].isoformat()})
