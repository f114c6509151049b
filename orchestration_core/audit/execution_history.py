"""The maintenance execution history's retention, run by the nightly `cleanup_job_runs` (in the racing location).

The history itself (`task_executions` in the maintenance registry, written by maintenance_jobs when a run ends) is
the record that outlives run retention; what lies below both packages is only its name, the tag that says a run's
summary is in it, and the rule that removes rows older than `MAINTENANCE_HISTORY_DAYS` (unset: kept forever).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

import sqlalchemy as sa

from orchestration_core.postgres import create_engine, vacuum_tables

EXECUTION_HISTORY_TABLE = "task_executions"
# Minutes the maintenance dispatcher skipped (catch-up bound after downtime), with the reason; pruned alike.
DISPATCH_SKIPS_TABLE = "dispatch_skips"
# On a maintenance run whose summary is in the history: the run's own id (Dagster's retries copy their parent's tags,
# so a copied value names another run and does not count). Retention never deletes a maintenance run without it.
TAG_HISTORY_RECORDED = "maintenance/history_recorded"
_DELETE_BATCH = 5000


@dataclass(frozen=True)
class HistoryPruneReport:
    cutoff: datetime
    executions_deleted: int
    skips_deleted: int


def history_cutoff(days: int, now: datetime) -> datetime:
    if days < 1:
        raise ValueError(f"MAINTENANCE_HISTORY_DAYS must be at least 1, got {days}")
    if now.tzinfo is None:
        raise ValueError("now must be timezone-aware")
    return now.astimezone(UTC) - timedelta(days=days)


def prune_execution_history(database_url: str, days: int, now: datetime | None = None) -> HistoryPruneReport:
    """Delete history rows triggered before `days` ago (and dispatcher skips that ended before it), in batches."""
    cutoff = history_cutoff(days, now or datetime.now(UTC))
    engine = create_engine(database_url, "oneshot")
    try:
        executions = _delete_older(engine, EXECUTION_HISTORY_TABLE, "triggered_at", cutoff)
        skips = _delete_older(engine, DISPATCH_SKIPS_TABLE, "skipped_until", cutoff)
        emptied = [table for table, n in ((EXECUTION_HISTORY_TABLE, executions), (DISPATCH_SKIPS_TABLE, skips)) if n]
        if emptied:
            vacuum_tables(engine.connect, emptied)  # as the run tables: the space is reused, not left to autovacuum
    finally:
        engine.dispose()
    return HistoryPruneReport(cutoff, executions, skips)


def _delete_older(engine: sa.Engine, table: str, column: str, cutoff: datetime) -> int:
    # Batches keep each transaction (and its lock on the rows) short while the API reads the table.
    statement = sa.text(
        f"DELETE FROM {table} WHERE ctid IN (SELECT ctid FROM {table} WHERE {column} < :cutoff LIMIT :batch)"
    )
    total = 0
    while True:
        with engine.begin() as conn:
            deleted = conn.execute(statement, {"cutoff": cutoff, "batch": _DELETE_BATCH}).rowcount
        total += deleted
        if deleted < _DELETE_BATCH:
            return total
