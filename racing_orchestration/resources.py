"""Resource wiring of the racing code location: one resource per external system."""

import os

import dagster as dg

from racing_orchestration.race_db.resource import RaceDatabase
from racing_orchestration.tab.client import DEFAULT_BASE_URL, DEFAULT_USER_AGENT, TabClient


def racing_resources() -> dict[str, dg.ConfigurableResource]:
    """Resources from the environment; the partner headers are identification, not secrets."""
    return {
        "tab_client": TabClient(
            base_url=os.environ.get("TAB_API_BASE_URL", DEFAULT_BASE_URL),
            from_email=os.environ.get("TAB_FROM_EMAIL", ""),
            partner_name=os.environ.get("TAB_PARTNER_NAME", ""),
            partner_id=os.environ.get("TAB_PARTNER_ID", ""),
            user_agent=os.environ.get("TAB_USER_AGENT", DEFAULT_USER_AGENT),
        ),
        # The URL carries the database password: resolved at run time, never shown in the UI.
        "race_db": RaceDatabase(url=dg.EnvVar("RACING_DATABASE_URL")),
    }
