"""Running `morning_scrape` outside the daemon (the `racing scrape` command and tests), as a recorded run."""

import datetime as dt
import time
from typing import NamedTuple

import dagster as dg

from racing_orchestration.ingestion.combinations import CombinationResult
from orchestration_core.run_outcome import outcome_of


def resolved_morning_scrape() -> dg.JobDefinition:
    """The job with its resources bound from the environment now (reconstructable by module path)."""
    from racing_orchestration.ingestion.jobs import morning_scrape
    from racing_orchestration.resources import racing_resources

    return dg.Definitions(jobs=[morning_scrape], resources=racing_resources()).resolve_job_def("morning_scrape")


class ScrapeRun(NamedTuple):
    run_id: str
    success: bool
    outcome: str
    results: list[CombinationResult]
    seconds: float


def run_morning_scrape(
    instance: dg.DagsterInstance,
    days: list[dt.date] | None = None,
    *,
    categories: list[str] | None = None,
    countries: list[str] | None = None,
    max_retries: int = 0,
    max_concurrent: int | None = None,
) -> ScrapeRun:
    """Execute morning_scrape once through the instance (threadpool executor); no retries by default."""
    from racing_orchestration.ingestion.jobs import morning_scrape_run_config

    run_config = morning_scrape_run_config(days, categories=categories, countries=countries, max_retries=max_retries,
                                           max_concurrent=max_concurrent)
    job = dg.build_reconstructable_job("racing_orchestration.ingestion.runner", "resolved_morning_scrape")
    started = time.monotonic()
    with dg.execute_job(job, instance=instance, run_config=run_config, raise_on_error=False) as result:
        seconds = time.monotonic() - started
        try:
            results = list(result.output_for_node("scrape_combination").values())
        except dg.DagsterError:  # no combination step produced an output (e.g. the plan step failed)
            results = []
        run = instance.get_run_by_id(result.run_id)
        return ScrapeRun(result.run_id, result.success, outcome_of(run.status, run.tags), results, seconds)
