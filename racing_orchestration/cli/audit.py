"""`racing audit`: recent runs, outcomes per job over a window, retry chains; a table, or JSON with --json.

`--retries` shows every chain of runs that are attempts of one piece of work: run re-executions (Dagster's parent and
root run ids: run retries, the UI's re-execute), the post-race attempts linked by `racing/previous_run_id`, and the
checkpoint ledger's re-requests under `<key>:retry<n>`; then every step retried inside a run (the morning scrape's
30-minute combination retries) with its waits and how it ended.
"""

from __future__ import annotations

import argparse
import json
import re
import sys

from tabulate import tabulate

from orchestration_core.audit.chains import RunChain, run_chains, step_retries
from orchestration_core.audit.queries import (
    outcome_counts,
    parse_window,
    recent_runs,
    retry_chains,
    to_jsonable,
)
from racing_orchestration.cli import needs_instance
from racing_orchestration.tab.showable import showable

_OUTCOME_COLUMNS = ("success", "partial", "failed", "canceled")
_RETRY_KEY = re.compile(r"^(?P<base>.+):retry(?P<n>[1-9][0-9]*)$")


def previous_request_key(key: str) -> str | None:
    """The run key a ledger re-request `<key>:retry<n>` followed: `<key>:retry<n-1>`, or `<key>` for the first."""
    from racing_orchestration.checkpoints.windows import retry_key

    match = _RETRY_KEY.match(key)
    if not match:
        return None
    number = int(match["n"])
    return match["base"] if number == 1 else retry_key(match["base"], number - 1)


def racing_chains(instance, since) -> list[RunChain]:
    """Chains with the racing location's links: post-race attempts and ledger re-requests besides re-executions."""
    from racing_orchestration.checkpoints.fetch import TAG_PREVIOUS_RUN_ID

    return run_chains(instance, since, previous_run_tags=(TAG_PREVIOUS_RUN_ID,), previous_key=previous_request_key)


def chain_rows(chains: list[RunChain]) -> list[list]:
    """One row per chain: its job, how its runs are linked, and each run (short id, outcome) oldest first."""
    return [[c.job_name, ", ".join(c.linked_by), len(c.links), c.final_outcome,
             " -> ".join(f"{link.run_id[:8]} {link.outcome}" for link in c.links)] for c in chains]


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
    parser.set_defaults(handler=run_audit, needs=needs_instance)


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
        table = _table(rows, headers=["job", "total", *_OUTCOME_COLUMNS, "other"])
    elif args.retries:
        since = args.since or parse_window("7d")
        report = retry_chains(instance, since)
        chains = racing_chains(instance, since)
        steps = sorted(step_retries(instance, since), key=lambda s: (s.job_name, s.run_id, s.step_key))
        data = {"groups": report.groups, "step_retries_by_job": report.step_retries_by_job, "chains": chains,
                "step_retries": steps}
        rows = [[g.job_name, g.retry_number, g.runs, _pairs(g.outcomes)] for g in report.groups]
        table = "Re-executions by retry number\n" + _table(rows, headers=["job", "retry #", "runs", "outcomes"])
        chain_headers = ["job", "linked by", "runs", "final", "runs (outcome)"]
        table += "\n\nRun chains (oldest run first)\n" + (_table(chain_rows(chains), headers=chain_headers)
                                                            if chains else "(none)")
        table += "\n\nStep retries inside runs\n" + (_table(
            [[s.job_name, s.run_id[:8], s.step_key, s.retries, ", ".join(f"{w:g} s" for w in s.waits_seconds),
              s.ended, s.status or ""] for s in steps],
            headers=["job", "run", "step", "retries", "waits", "step ended", "result"]) if steps else "(none)")
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
        table = _table(rows, headers=["created (UTC)", "job", "outcome", "retry #", "items", "failed", "secs", "run"])
    if args.json:
        json.dump(to_jsonable(data), sys.stdout, indent=2)
        sys.stdout.write("\n")
    else:
        print(table or "(no runs)")
    return 0


# An escape is at most six characters (`\u202e`): a limit this many times a cell's length never cuts it.
_NO_CUT = 6


def shown_cells(rows: list[list]) -> list[list]:
    """Each text cell made showable before the table is laid out (so the columns still line up): the tables quote run
    tags, which whoever launched a run chose, and a terminal must not run their escapes or reorder their bidi text."""
    return [[showable(cell, limit=_NO_CUT * len(cell) + 1) if isinstance(cell, str) else cell for cell in row]
            for row in rows]


def _table(rows, headers: list[str]) -> str:
    return tabulate(shown_cells([list(row) for row in rows]), headers=headers)


def _other(counts: dict[str, int]) -> str:
    return _pairs({k: v for k, v in counts.items() if k not in _OUTCOME_COLUMNS})


def _pairs(counts: dict[str, int]) -> str:
    return ", ".join(f"{k}={v}" for k, v in counts.items())
