"""`racing scrape`: run morning_scrape once against the configured instance and print a summary."""

from __future__ import annotations

import argparse
import datetime as dt
import sys

from tabulate import tabulate

from racing_orchestration.cli import dagster_home_missing

EXIT_PARTIAL = 1
EXIT_FAILED = 2



def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "scrape",
        help="run morning_scrape once (no 30-minute retry waits) and print a summary",
        description="Runs the morning_scrape job once against the instance in $DAGSTER_HOME, recorded in the audit "
        "trail. Failed combinations are reported instead of retried. Exit 0 on success, 1 partial, 2 failed.",
    )
    parser.add_argument("--date", action="append", type=dt.date.fromisoformat, dest="dates",
                        help="YYYY-MM-DD (repeatable); default today and tomorrow in RACING_TIMEZONE")
    parser.add_argument("--categories", help="comma list, default T,H,G")
    parser.add_argument("--countries", help="comma list, default NZ,AUS")
    parser.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    import dagster as dg

    from racing_orchestration.ingestion.combinations import summarize
    from racing_orchestration.ingestion.runner import run_morning_scrape

    if dagster_home_missing("scrape"):
        return EXIT_FAILED
    with dg.DagsterInstance.get() as instance:
        run = run_morning_scrape(
            instance,
            args.dates,
            categories=args.categories.split(",") if args.categories else None,
            countries=args.countries.split(",") if args.countries else None,
        )
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
    if run.outcome == "success" and run.success:
        return 0
    if run.outcome == "partial":
        print("racing scrape: partial: some combinations failed (see above)", file=sys.stderr)
        return EXIT_PARTIAL
    print("racing scrape: failed: see the run in the Dagster UI for the error", file=sys.stderr)
    return EXIT_FAILED
