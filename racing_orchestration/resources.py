"""Resource wiring of the racing code location: one resource per external system, built in the process that uses it
from the deployment's settings. Run config cannot set any of them (orchestration_core/run_config_rules.py): a launch
from the UI that names `tab_client.base_url`, `race_db.url` or `race_export.path` is refused before a run exists."""

import dagster as dg

from orchestration_core.run_config_rules import deployment_resource, required_env, run_outputs_io_manager
from racing_orchestration.export.resource import RaceExportFolder
from racing_orchestration.race_db.resource import RaceDatabase
from racing_orchestration.settings import racing_settings
from racing_orchestration.tab.client import TabClient


def deployment_tab_client() -> TabClient:
    """TAB_API_BASE_URL and the partner headers (identification, not secrets)."""
    settings = racing_settings()
    return TabClient(
        base_url=settings.tab_api_base_url,
        from_email=settings.tab_from_email,
        partner_name=settings.tab_partner_name,
        partner_id=settings.tab_partner_id,
        user_agent=settings.tab_user_agent,
    )


def deployment_race_database() -> RaceDatabase:
    # The URL carries the database password: read in the worker, never part of any config the UI shows.
    return RaceDatabase(url=required_env("RACING_DATABASE_URL"))


def deployment_export_folder() -> RaceExportFolder:
    return RaceExportFolder(path=racing_settings().racing_export_dir)


def racing_resources() -> dict[str, dg.ResourceDefinition]:
    return {
        "tab_client": deployment_resource(deployment_tab_client, "The TAB API at TAB_API_BASE_URL."),
        "race_db": deployment_resource(deployment_race_database, "The race database at RACING_DATABASE_URL."),
        "race_export": deployment_resource(deployment_export_folder, "The Parquet export folder RACING_EXPORT_DIR."),
        "io_manager": run_outputs_io_manager,
    }
