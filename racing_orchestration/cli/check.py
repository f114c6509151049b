"""`racing check RACE_ID --checkpoint t60|t15|post`: take one race's checkpoint now, through the same job."""

from __future__ import annotations

import argparse
import sys

from racing_orchestration.cli import dagster_home_missing

EXIT_PARTIAL = 1
EXIT_FAILED = 2


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "check",
        help="run one race's checkpoint now (an operator's re-fetch), recorded in the audit trail",
        description="Runs pre_race_t60, pre_race_t15 or post_race_t5 for one race against the instance in "
        "$DAGSTER_HOME, whatever the time, tagged racing/triggered_by=manual. Exit 0 on success, 1 partial "
        "(results still provisional), 2 failed.",
    )
    parser.add_argument("race_id", help="the race (TAB event) id")
    parser.add_argument("--checkpoint", required=True, choices=["t60", "t15", "post"])
    parser.add_argument("--no-wait", action="store_true",
                        help="post: kept for compatibility; a manual post check is always one attempt (the 5/5/10 "
                        "minute chain belongs to the post-race sensor), provisional if not Final")
    parser.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    import dagster as dg
    from tabulate import tabulate

    from racing_orchestration.checkpoints.runner import run_checkpoint

    if dagster_home_missing("check"):
        return EXIT_FAILED
    with dg.DagsterInstance.get() as instance:
        result = run_checkpoint(instance, args.race_id, args.checkpoint, [] if args.no_wait else None)
    if result.summary:
        print(tabulate([[k, v] for k, v in result.summary.items()], headers=["field", "value"]))
    print(f"\nrun {result.run_id}: {result.outcome} ({result.seconds:.1f} s)")
    if result.success and result.outcome == "success":
        return 0
    if result.outcome == "partial":
        print(f"racing check: partial: {result.error}", file=sys.stderr)
        return EXIT_PARTIAL
    print(f"racing check: failed: {result.error or 'see the run in the Dagster UI'}", file=sys.stderr)
    return EXIT_FAILED
