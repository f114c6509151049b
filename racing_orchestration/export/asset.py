"""`race_day_export`: each racing day's meetings, races, runners, T-60/T-15 odds, results and dividends as Parquet
files for analysts (docs/race-data-export.md), kept up to date for recent days by the race_data_automation sensor."""

import datetime as dt
from zoneinfo import ZoneInfo

import dagster as dg

from orchestration_core.run_outcome import Outcome, record_outcome
from orchestration_core.settings import racing_timezone
from racing_orchestration.export.resource import RaceExportFolder
from racing_orchestration.export.retention import export_cutoff, prune_exports
from racing_orchestration.race_data.automation import recent_day_data_arrived
from racing_orchestration.race_data.catalog import GROUP, ODDS_T15, ODDS_T60, RACE_CARDS, RACE_RESULTS, racing_days
from racing_orchestration.race_data.freshness import DAILY_DERIVED_FRESHNESS
from racing_orchestration.race_db.resource import RaceDatabase
from racing_orchestration.settings import racing_settings


@dg.asset(
    partitions_def=racing_days,
    deps=[RACE_CARDS, ODDS_T60, ODDS_T15, RACE_RESULTS],
    group_name=GROUP,
    kinds={"parquet"},
    backfill_policy=dg.BackfillPolicy.single_run(),
    automation_condition=recent_day_data_arrived(),
    freshness_policy=DAILY_DERIVED_FRESHNESS,
    description="The racing day's meetings, races, runners, T-60 and T-15 odds, results and dividends, one Parquet "
    "file per table at RACING_EXPORT_DIR/<table>/<table>_<day>.parquet (schema: docs/race-data-export.md). "
    "Re-exporting replaces the files atomically and leaves unchanged ones alone.",
)
def race_day_export(context: dg.AssetExecutionContext, race_db: RaceDatabase,
                    race_export: RaceExportFolder) -> None:
    # Imported here: pyarrow is CPU time that every process loading the definitions (code servers,
    # each run worker, the CLI) would otherwise pay, and only this asset's runs use it (BENCHMARKS.md "Process
    # start-up").
    from racing_orchestration.export.writer import export_day

    root = race_export.root()
    exported = [dt.date.fromisoformat(key) for key in context.partition_keys]
    for key in context.partition_keys:
        with race_db.connect() as conn:
            export = export_day(conn, dt.date.fromisoformat(key), root)
        context.add_asset_metadata(
            {
                **{f"{name}_rows": rows for name, rows in export.rows.items()},
                "files_written": export.files_written,
                "files_unchanged": len(export.tables) - export.files_written,
                "seconds": round(export.seconds, 3),
                "folder": dg.MetadataValue.path(str(root.resolve())),
            },
            partition_key=key,
        )
        context.log.info(f"exported {key}: " + ", ".join(f"{t.table} {t.rows}" for t in export.tables)
                         + f" ({export.files_written} of {len(export.tables)} files changed, {export.seconds:.2f} s)")
    _prune_expired(context, root, exported)
    record_outcome(context.op_execution_context, Outcome.SUCCESS, len(context.partition_keys), 0)


def _prune_expired(context: dg.AssetExecutionContext, root, exported: list[dt.date]) -> None:
    """RACING_EXPORT_RETENTION_DAYS: delete day files older than it (the days this run wrote stay until the next run:
    a backfill of an old day is not undone by its own run)."""
    keep_days = racing_settings().racing_export_retention_days
    if keep_days is None:
        return
    today = dt.datetime.now(ZoneInfo(racing_timezone())).date()
    deleted = prune_exports(root, keep_days, today, spare=exported)
    if deleted:
        context.log.info(f"export retention ({keep_days} days): deleted {len(deleted)} files older than "
                         f"{export_cutoff(keep_days, today).isoformat()}")
