"""`racing cleanup`: run the retention job once against the configured instance (so the run joins the audit trail)."""

from __future__ import annotations

import argparse
import json

from orchestration_core.audit.cleanup import DEFAULT_BATCH_SIZE, DEFAULT_OLDER_THAN_DAYS
from racing_orchestration.cli import needs_instance


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "cleanup", help="Delete successful runs older than N days (events and compute logs too); keep the rest."
    )
    parser.add_argument("--dry-run", action="store_true", help="count what would be deleted, delete nothing")
    parser.add_argument("--older-than-days", type=_positive_int, default=DEFAULT_OLDER_THAN_DAYS, metavar="N")
    parser.add_argument("--batch-size", type=_positive_int, default=DEFAULT_BATCH_SIZE, metavar="N")
    parser.add_argument("--json", action="store_true", help="print the report as JSON")
    parser.set_defaults(handler=run_cleanup, needs=needs_instance)


def _positive_int(text: str) -> int:
    if not text.isdigit() or int(text) < 1:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {text!r}")
    return int(text)


def run_cleanup(args: argparse.Namespace, instance=None) -> int:
    import dagster as dg

    from orchestration_core.audit.jobs import cleanup_job_runs

    instance = instance or dg.DagsterInstance.get()  # needs DAGSTER_HOME
    config = {"older_than_days": args.older_than_days, "dry_run": args.dry_run, "batch_size": args.batch_size}
    result = cleanup_job_runs.execute_in_process(
        instance=instance,
        run_config={"ops": {"prune_old_successful_runs": {"config": config}}},
        tags={"racing/trigger": "cli"},
        raise_on_error=False,
    )
    if not result.success:
        print(f"cleanup run {result.run_id} failed; see `dagster run list` / the UI for its events")
        return 1
    report = result.output_for_node("prune_old_successful_runs")
    if args.json:
        print(json.dumps({"run_id": result.run_id, **report}, indent=2))
        return 0
    verb = "would delete" if args.dry_run else "deleted"
    count = report["would_delete"] if args.dry_run else report["deleted"]
    kept = ", ".join(f"{k}={v}" for k, v in report["kept"].items()) or "none"
    print(f"{verb} {count} successful runs created before {report['cutoff']} (UTC) in {report['duration_seconds']}s")
    print(f"kept {report['kept_total']}: {kept}")
    print(f"recorded as run {result.run_id}")
    return 0
