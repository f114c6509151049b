"""The nightly retention job: `cleanup_job_runs` and its 02:00 schedule in the racing timezone."""

# No `from __future__ import annotations` here: Dagster resolves the op's Config annotation at decoration time.

import dagster as dg

from orchestration_core.audit.cleanup import (
    DEFAULT_BATCH_SIZE,
    DEFAULT_OLDER_THAN_DAYS,
    prune_successful_runs,
)
from orchestration_core.run_outcome import (
    KIND_RACING,
    TAG_KIND,
    Outcome,
    record_outcome,
)
from orchestration_core.settings import racing_timezone


class CleanupConfig(dg.Config):
    older_than_days: int = DEFAULT_OLDER_THAN_DAYS
    dry_run: bool = False
    batch_size: int = DEFAULT_BATCH_SIZE


@dg.op(description="Delete SUCCESS runs older than the cutoff with their events and compute logs; keep the rest.")
def prune_old_successful_runs(context: dg.OpExecutionContext, config: CleanupConfig) -> dict:
    report = prune_successful_runs(
        context.instance,
        config.older_than_days,
        dry_run=config.dry_run,
        batch_size=config.batch_size,
        log=context.log,
    )
    metadata = report.as_metadata()
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
        }
    )
    record_outcome(context, Outcome.SUCCESS, items_processed=report.deleted, items_failed=0)
    return metadata


@dg.job(
    description="Run retention: prune old successful runs (the audit keeps failures, partials and their recoveries).",
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
