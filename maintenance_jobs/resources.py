"""Resources of the maintenance location: the task registry and the Gitea server docs are mirrored to."""

from __future__ import annotations

import sqlalchemy as sa

import dagster as dg
from maintenance_jobs.database.engine import registry_engine
from maintenance_jobs.seed import prepare_registry
from maintenance_jobs.settings import DEFAULT_MAX_CATCHUP_MINUTES


class MaintenanceRegistryResource(dg.ConfigurableResource):
    """The Postgres task registry (`MAINTENANCE_DATABASE_URL`), migrated and seeded on first use."""

    database_url: str
    timezone: str
    max_catchup_minutes: int = DEFAULT_MAX_CATCHUP_MINUTES

    def engine(self) -> sa.Engine:
        prepare_registry(self.database_url)  # once per process
        return registry_engine(self.database_url)


class GiteaResource(dg.ConfigurableResource):
    """The Gitea server doc sync pushes to; the token is sent as an HTTP header, never put in URLs."""

    base_url: str
    token: str | None = None
    work_dir: str
