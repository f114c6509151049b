"""The nightly retention job: `cleanup_job_runs` and its 02:00 schedule in the racing timezone. It prunes old
successful runs (and, when RUN_RETENTION_FAILED_DAYS is set, failed, canceled and partial runs older than that), then
the maintenance execution history beyond MAINTENANCE_HISTORY_DAYS (when that is set). The failed runs' retention is a
setting, not run config: a run launched from the UI cannot shorten the audit trail."""

# No `from __future__ import annotations` here: Dagster resolves the op's Config annotation at decoration time.

from datetime import datetime
from zoneinfo import ZoneInfo

import dagster as dg

from orchestration_core.audit.bulk_delete import reindex_tables
from orchestration_core.audit.execution_history import HistoryPruneReport, prune_execution_history
from orchestration_core.audit.cleanup import (
    DEFAULT_BATCH_SIZE,
    DEFAULT_OLDER_THAN_DAYS,
    prune_successful_runs,
    reindex_due,
)
from orchestration_core.run_config_rules import literal_config_schema
from orchestration_core.run_outcome import (
    KIND_RACING,
    TAG_KIND,
    Outcome,
    record_outcome,
)
from orchestration_core.settings import platform_settings, racing_timezone, secret


class CleanupConfig(dg.Config):
    older_than_days: int = DEFAULT_OLDER_THAN_DAYS
    dry_run: bool = False
    batch_size: int = DEFAULT_BATCH_SIZE
    vacuum: bool = True  # VACUUM (ANALYZE) the emptied tables afterwards
    # REINDEX TABLE CONCURRENTLY the run and event tables every this many days (0: never): the index pages the kept
    # runs hold (orchestration_core/audit/bulk_delete.py) go back to a packed size.
    reindex_every_days: int = 7


@dg.op(description="Delete SUCCESS runs older than the cutoff with their events and compute logs; keep the rest.",
       config_schema=literal_config_schema(CleanupConfig))
def prune_old_successful_runs(context: dg.OpExecutionContext) -> dict:
    config = CleanupConfig(**context.op_config)
    try:
        today = datetime.now(ZoneInfo(racing_timezone())).date()
        reindex_today = reindex_due(today, config.reindex_every_days)  # bad config fails here, before any delete
        report = prune_successful_runs(
            context.instance,
            config.older_than_days,
            failed_older_than_days=platform_settings().run_retention_failed_days,
            dry_run=config.dry_run,
            batch_size=config.batch_size,
            vacuum=config.vacuum,
            log=context.log,
        )
    except ValueError as error:  # e.g. older_than_days above RUN_RETENTION_FAILED_DAYS: nothing was deleted
        raise dg.Failure(str(error)) from error
    reindex_seconds = None
    if not config.dry_run and report.deleted and reindex_today:
        try:
            reindex_seconds = reindex_tables(context.instance)
        except Exception as error:  # noqa: BLE001 - the deletes are done; a failed rebuild is retried next time
            context.log.warning(f"REINDEX of the run tables failed, retried at the next due night: {error}")
    metadata = report.as_metadata()
    history = None if config.dry_run else _prune_history(context)
    if history is not None:
        metadata["history_rows_deleted"] = history.executions_deleted
        metadata["history_cutoff_utc"] = history.cutoff.isoformat()
    context.add_output_metadata(
        {
            "deleted": report.deleted,
            "would_delete": report.would_delete,
            "kept_total": metadata["kept_total"],
            "kept_by_reason": dg.MetadataValue.json(report.kept),
            "duration_seconds": metadata["duration_seconds"],
            "dry_run": report.dry_run,
            "cutoff_utc": metadata["cutoff"],
            "batches": report.batches,
            "deleted_failed_or_partial": report.deleted_problems,
            "failed_cutoff_utc": metadata["problem_cutoff"] or "never (RUN_RETENTION_FAILED_DAYS unset)",
            **({"vacuum_seconds": round(report.vacuum_seconds, 3)} if report.vacuum_seconds is not None else {}),
            **({"reindex_seconds": round(reindex_seconds, 3)} if reindex_seconds is not None else {}),
            **({"history_rows_deleted": history.executions_deleted,
                "history_cutoff_utc": history.cutoff.isoformat()} if history else {}),
        }
    )
    record_outcome(context, Outcome.SUCCESS, items_processed=report.deleted, items_failed=0)
    return metadata


def _prune_history(context: dg.OpExecutionContext) -> HistoryPruneReport | None:
    """Delete execution-history rows older than MAINTENANCE_HISTORY_DAYS; None when the history is kept forever."""
    settings = platform_settings()
    days = settings.maintenance_history_days
    if days is None:
        return None
    url = secret(settings.maintenance_database_url)
    if not url:
        raise dg.Failure("MAINTENANCE_HISTORY_DAYS is set but MAINTENANCE_DATABASE_URL is not: the execution history "
                         "cannot be pruned")
    report = prune_execution_history(url, days)
    context.log.info(f"execution history: {report.executions_deleted} rows and {report.skips_deleted} dispatcher "
                     f"skips older than {report.cutoff.isoformat()} deleted")
    return report


@dg.job(
    description="Run retention: prune old successful runs (the audit keeps failures, partials and their recoveries)"
    " and the maintenance execution history beyond MAINTENANCE_HISTORY_DAYS.",
    tags={TAG_KIND: KIND_RACING},
)
def cleanup_job_runs() -> None:
    prune_old_successful_runs()


cleanup_job_runs_schedule = dg.ScheduleDefinition(
    name="cleanup_job_runs_schedule",
    job=cleanup_job_runs,
    cron_schedule="0 2 * * *",
    execution_timezone=racing_timezone(),
    default_status=dg.DefaultScheduleStatus.RUNNING,
)
