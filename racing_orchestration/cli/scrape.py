"""`racing scrape`: run morning_scrape once against the configured instance and print a summary."""

from __future__ import annotations

import argparse
import datetime as dt
import sys

from tabulate import tabulate

from racing_orchestration.checkpoints.fetch import TAG_TRIGGERED_BY
from racing_orchestration.cli import needs_instance_and_race_db
from racing_orchestration.cli.launch import EXIT_STILL_QUEUED, add_queue_arguments, submit

EXIT_PARTIAL = 1
EXIT_FAILED = 2


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "scrape",
        help="run morning_scrape once (no 30-minute retry waits) and print a summary",
        description="Queues one morning_scrape run through the Dagster webserver (DAGSTER_UI_URL) on the instance in "
        "$DAGSTER_HOME and waits for it; needs a daemon serving the run queue, else use --in-process (which also "
        "prints the per-combination table). Failed combinations are reported instead of retried. Exit 0 on success "
        "(or submitted, with --detach), 1 partial, 2 failed, 3 still queued when no daemon serves the queue any "
        "more (the run stays queued).",
    )
    parser.add_argument("--date", action="append", type=dt.date.fromisoformat, dest="dates",
                        help="YYYY-MM-DD (repeatable); default today and tomorrow in RACING_TIMEZONE")
    parser.add_argument("--categories", help="comma list, default T,H,G")
    parser.add_argument("--countries", help="comma list, default NZ,AUS")
    add_queue_arguments(parser)
    parser.set_defaults(handler=run, needs=needs_instance_and_race_db)


def _split(value: str | None) -> list[str] | None:
    return value.split(",") if value else None


def run(args: argparse.Namespace) -> int:
    return run_in_process(args) if args.in_process else run_queued(args)


def run_queued(args: argparse.Namespace) -> int:
    import dagster as dg

    from orchestration_core.run_outcome import TAG_ITEMS_FAILED, TAG_ITEMS_PROCESSED

    from racing_orchestration.ingestion.jobs import morning_scrape_run_config

    # No retry waits: the command reports failed combinations rather than holding the terminal for 30 minutes.
    run_config = morning_scrape_run_config(args.dates, categories=_split(args.categories),
                                           countries=_split(args.countries), max_retries=0)
    with dg.DagsterInstance.get() as instance:
        queued = submit("scrape", instance, "morning_scrape", run_config, {TAG_TRIGGERED_BY: "manual"},
                        detach=args.detach)
        if queued is None:
            return EXIT_FAILED
        run = instance.get_run_by_id(queued.run_id)
    if args.detach:
        print(f"run {queued.run_id}: {queued.status.lower()} (not waited for; follow it at {queued.url})")
        return 0
    if queued.stalled:  # said why on stderr; the run stays queued
        return EXIT_STILL_QUEUED
    tags = run.tags if run is not None else {}
    print(tabulate([[tags.get(TAG_ITEMS_PROCESSED, "?"), tags.get(TAG_ITEMS_FAILED, "?")]],
                   headers=["combinations ok", "combinations failed"]))
    print(f"\nrun {queued.run_id}: {queued.outcome}")
    return _exit_code(queued.outcome)


def run_in_process(args: argparse.Namespace) -> int:
    import dagster as dg

    from racing_orchestration.ingestion.combinations import summarize
    from racing_orchestration.ingestion.runner import run_morning_scrape

    with dg.DagsterInstance.get() as instance:
        run = run_morning_scrape(instance, args.dates, categories=_split(args.categories),
                                 countries=_split(args.countries))
    summary = summarize(run.results)
    print(tabulate(
        [[summary.combinations, summary.ok, summary.empty, summary.failed, summary.meetings, summary.races,
          summary.api_requests, f"{run.seconds:.1f} s"]],
        headers=["combinations", "ok", "empty", "failed", "meetings", "races", "API requests", "duration"],
    ))
    failed = [r for r in run.results if r.status == "failed"]
    if failed:
        print("\nFailed combinations:")
        print(tabulate([[r.combination.category, r.combination.country, r.combination.day, r.error] for r in failed],
                       headers=["category", "country", "date", "error"]))
    print(f"\nrun {run.run_id}: {run.outcome}")
    return _exit_code(run.outcome if run.success or run.outcome != "success" else "failed")


def _exit_code(outcome: str) -> int:
    if outcome == "success":
        return 0
    if outcome == "partial":
        print("racing scrape: partial: some combinations failed (see above)", file=sys.stderr)
        return EXIT_PARTIAL
    print("racing scrape: failed: see the run in the Dagster UI for the error", file=sys.stderr)
    return EXIT_FAILED
