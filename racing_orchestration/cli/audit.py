"""`racing audit`: recent runs, outcomes per job over a window, retry chains; a table, or JSON with --json."""

from __future__ import annotations

import argparse
import json
import sys

from tabulate import tabulate

from orchestration_core.audit.queries import (
    outcome_counts,
    parse_window,
    recent_runs,
    retry_chains,
    to_jsonable,
)

_OUTCOME_COLUMNS = ("success", "partial", "failed", "canceled")


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser("audit", help="Query the run audit trail in the configured Dagster instance.")
    mode = parser.add_mutually_exclusive_group()
    mode.add_argument("--recent", action="store_true", help="recent runs (the default)")
    mode.add_argument("--by-outcome", action="store_true", help="per job, run counts by outcome over --since")
    mode.add_argument("--retries", action="store_true", help="re-executions grouped by job and retry number")
    parser.add_argument(
        "--since", type=_window, default=None, help="window such as 24h, 7d (default 24h; 7d for --retries)"
    )
    parser.add_argument("--limit", type=_positive_int, default=20, help="rows for recent runs (default 20)")
    parser.add_argument("--job", default=None, help="only this job (recent runs)")
    parser.add_argument("--json", action="store_true", help="machine-readable output")
    parser.set_defaults(handler=run_audit)


def _window(text: str):
    try:
        return parse_window(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from exc


def _positive_int(text: str) -> int:
    if not text.isdigit() or int(text) < 1:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {text!r}")
    return int(text)


def run_audit(args: argparse.Namespace, instance=None) -> int:
    import dagster as dg

    instance = instance or dg.DagsterInstance.get()
    if args.by_outcome:
        data = outcome_counts(instance, args.since or parse_window("24h"))
        rows = [[c.job_name, c.total, *(c.counts.get(k, 0) for k in _OUTCOME_COLUMNS), _other(c.counts)] for c in data]
        table = tabulate(rows, headers=["job", "total", *_OUTCOME_COLUMNS, "other"])
    elif args.retries:
        data = retry_chains(instance, args.since or parse_window("7d"))
        rows = [[g.job_name, g.retry_number, g.runs, _pairs(g.outcomes)] for g in data.groups]
        table = tabulate(rows, headers=["job", "retry #", "runs", "outcomes"])
        steps = [[job, n] for job, n in data.step_retries_by_job.items()]
        if steps:
            table += "\n\n" + tabulate(steps, headers=["job", "step retries"])
    else:
        data = recent_runs(instance, args.limit, args.job)
        rows = [
            [
                r.created_at.strftime("%Y-%m-%d %H:%M:%S"),
                r.job_name,
                r.outcome,
                r.retry_number,
                r.items_processed if r.items_processed is not None else "",
                r.items_failed if r.items_failed is not None else "",
                f"{r.duration_seconds:.1f}" if r.duration_seconds is not None else "",
                r.run_id[:8],
            ]
            for r in data
        ]
        table = tabulate(rows, headers=["created (UTC)", "job", "outcome", "retry #", "items", "failed", "secs", "run"])
    if args.json:
        json.dump(to_jsonable(data), sys.stdout, indent=2)
        sys.stdout.write("\n")
    else:
        print(table or "(no runs)")
    return 0


def _other(counts: dict[str, int]) -> str:
    return _pairs({k: v for k, v in counts.items() if k not in _OUTCOME_COLUMNS})


def _pairs(counts: dict[str, int]) -> str:
    return ", ".join(f"{k}={v}" for k, v in counts.items())
