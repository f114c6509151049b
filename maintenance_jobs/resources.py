"""Resources of the maintenance location: the task registry and the Gitea server docs are mirrored to."""

from __future__ import annotations

import sqlalchemy as sa

import dagster as dg
from maintenance_jobs.database.engine import registry_engine
from maintenance_jobs.seed import prepare_registry
from maintenance_jobs.settings import DEFAULT_MAX_CATCHUP_MINUTES, maintenance_settings
from orchestration_core.run_config_rules import deployment_resource, required_env, run_outputs_io_manager


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


def deployment_registry() -> MaintenanceRegistryResource:
    settings = maintenance_settings()
    return MaintenanceRegistryResource(database_url=required_env("MAINTENANCE_DATABASE_URL"),
                                       timezone=settings.timezone, max_catchup_minutes=settings.max_catchup_minutes)


def deployment_gitea() -> GiteaResource:
    # Built only for the doc-sync op; the control API checks the same variables before a manual trigger
    # (trigger.REQUIRED_ENV).
    return GiteaResource(base_url=required_env("GITEA_URL"), token=required_env("GITEA_TOKEN"),
                         work_dir=maintenance_settings().work_dir)


def maintenance_resources() -> dict[str, dg.ResourceDefinition]:
    """The registry and the Gitea server, built where they are used from the deployment's settings; run config
    cannot set any of them (orchestration_core/run_config_rules.py): a launch naming `gitea.base_url` is refused."""
    return {
        "maintenance_registry": deployment_resource(deployment_registry,
                                                    "The task registry at MAINTENANCE_DATABASE_URL."),
        "gitea": deployment_resource(deployment_gitea, "The Gitea server at GITEA_URL, token GITEA_TOKEN."),
        "io_manager": run_outputs_io_manager,
    }
