"""`racing check RACE_ID --checkpoint t60|t15|post`: take one race's checkpoint now, through the same job."""

from __future__ import annotations

import argparse
import sys

from racing_orchestration.cli import needs_instance_and_race_db
from racing_orchestration.cli.launch import EXIT_STILL_QUEUED, add_queue_arguments, output_metadata, submit

EXIT_PARTIAL = 1
EXIT_FAILED = 2


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "check",
        help="run one race's checkpoint now (an operator's re-fetch), recorded in the audit trail",
        description="Queues pre_race_t60, pre_race_t15 or post_race_t5 for one race through the Dagster webserver "
        "(DAGSTER_UI_URL) on the instance in $DAGSTER_HOME, whatever the time, tagged racing/triggered_by=manual and "
        "racing/race_id (so it waits for the sensor's run of the same race), and waits for it; needs a daemon "
        "serving the run queue, else use --in-process. Exit 0 on success (or submitted, with --detach), 1 partial "
        "(results still provisional), 2 failed, 3 still queued when no daemon serves the queue any more (the run "
        "stays queued).",
    )
    parser.add_argument("race_id", help="the race (TAB event) id")
    parser.add_argument("--checkpoint", required=True, choices=["t60", "t15", "post"])
    parser.add_argument("--no-wait", action="store_true",
                        help="post: kept for compatibility; a manual post check is always one attempt (the 5/5/10 "
                        "minute chain belongs to the post-race sensor), provisional if not Final")
    add_queue_arguments(parser)
    parser.set_defaults(handler=run, needs=needs_instance_and_race_db)


def run(args: argparse.Namespace) -> int:
    return run_in_process(args) if args.in_process else run_queued(args)


def run_queued(args: argparse.Namespace) -> int:
    import dagster as dg
    from tabulate import tabulate

    from racing_orchestration.checkpoints.runner import manual_checkpoint_run

    job_name, run_config, tags = manual_checkpoint_run(args.race_id, args.checkpoint, [] if args.no_wait else None)
    with dg.DagsterInstance.get() as instance:
        queued = submit("check", instance, job_name, run_config, tags, detach=args.detach)
        if queued is None:
            return EXIT_FAILED
        summary = output_metadata(instance, queued.run_id)
    if args.detach:
        print(f"run {queued.run_id}: {queued.status.lower()} (not waited for; follow it at {queued.url})")
        return 0
    if queued.stalled:  # said why on stderr; the run stays queued
        return EXIT_STILL_QUEUED
    if summary:
        print(tabulate([[k, v] for k, v in summary.items()], headers=["field", "value"]))
    print(f"\nrun {queued.run_id}: {queued.outcome}")
    return _exit_code(queued.outcome, queued.error)


def run_in_process(args: argparse.Namespace) -> int:
    import dagster as dg
    from tabulate import tabulate

    from racing_orchestration.checkpoints.runner import run_checkpoint

    with dg.DagsterInstance.get() as instance:
        result = run_checkpoint(instance, args.race_id, args.checkpoint, [] if args.no_wait else None)
    if result.summary:
        print(tabulate([[k, v] for k, v in result.summary.items()], headers=["field", "value"]))
    print(f"\nrun {result.run_id}: {result.outcome} ({result.seconds:.1f} s)")
    if not result.success and result.outcome == "success":
        return _exit_code("failed", result.error)
    return _exit_code(result.outcome, result.error)


def _exit_code(outcome: str, error: str) -> int:
    if outcome == "success":
        return 0
    if outcome == "partial":
        print(f"racing check: partial: {error}", file=sys.stderr)
        return EXIT_PARTIAL
    print(f"racing check: failed: {error or 'see the run in the Dagster UI'}", file=sys.stderr)
    return EXIT_FAILED
