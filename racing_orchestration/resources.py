"""Resource wiring of the racing code location: one resource per external system."""

import dagster as dg

from racing_orchestration.export.resource import RaceExportFolder
from racing_orchestration.race_db.resource import RaceDatabase
from racing_orchestration.settings import racing_settings
from racing_orchestration.tab.client import TabClient


def racing_resources() -> dict[str, dg.ConfigurableResource]:
    """Resources from the settings; the partner headers are identification, not secrets."""
    settings = racing_settings()
    return {
        "tab_client": TabClient(
            base_url=settings.tab_api_base_url,
            from_email=settings.tab_from_email,
            partner_name=settings.tab_partner_name,
            partner_id=settings.tab_partner_id,
            user_agent=settings.tab_user_agent,
        ),
        # The URL carries the database password: resolved at run time, never shown in the UI.
        "race_db": RaceDatabase(url=dg.EnvVar("RACING_DATABASE_URL")),
        "race_export": RaceExportFolder(path=settings.racing_export_dir),
    }
