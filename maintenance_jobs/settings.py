"""Settings of the maintenance location, from the environment (see orchestration_core.settings for the rules).

`MaintenanceSettings` is also what plug-in executors receive as `settings` (timezone, work_dir, plugin_package).
Secrets (the registry URL, the Gitea token) reach Dagster resources through `dg.EnvVar` only.
"""

from __future__ import annotations

from pathlib import Path

from pydantic import AliasChoices, Field, SecretStr, model_validator

from orchestration_core.settings import SettingsBase, racing_timezone

DEFAULT_PLUGIN_PACKAGE = "maintenance_jobs.plugins"
PLUGIN_ENTRY_POINT_GROUP = "maintenance_jobs.executors"
# Catch-up after downtime is bounded: older minutes are skipped (and reported) rather than flooding the queue.
DEFAULT_MAX_CATCHUP_MINUTES = 60


def _alias(name: str, env: str) -> AliasChoices:
    return AliasChoices(name, env)


class MaintenanceSettings(SettingsBase):
    # None until validated: then MAINTENANCE_TIMEZONE, else the racing timezone.
    timezone: str | None = Field(None, validation_alias=_alias("timezone", "MAINTENANCE_TIMEZONE"),
                                 description="timezone of the tasks' cron fields (default: RACING_TIMEZONE)")
    plugin_package: str = Field(DEFAULT_PLUGIN_PACKAGE,
                                validation_alias=_alias("plugin_package", "MAINTENANCE_PLUGIN_PACKAGE"),
                                description="where plug-in executors are found")
    max_catchup_minutes: int = Field(DEFAULT_MAX_CATCHUP_MINUTES, ge=1,
                                     validation_alias=_alias("max_catchup_minutes", "MAINTENANCE_MAX_CATCHUP_MINUTES"),
                                     description="how far back the dispatcher catches up after downtime")
    work_dir: str = Field(str(Path.home() / ".cache" / "maintenance_jobs"),
                          validation_alias=_alias("work_dir", "MAINTENANCE_WORK_DIR"),
                          description="git caches of the doc-sync executor")
    gitea_url: str | None = Field(None, description="the doc-sync target (a Gitea-style server)")
    gitea_token: SecretStr | None = Field(None, description="the token doc sync pushes with")

    @model_validator(mode="after")
    def _default_timezone(self) -> MaintenanceSettings:
        if not self.timezone:
            object.__setattr__(self, "timezone", racing_timezone())
        return self


def maintenance_settings() -> MaintenanceSettings:
    return MaintenanceSettings()


def maintenance_timezone() -> str:
    """IANA timezone the task cron fields are read in (`MAINTENANCE_TIMEZONE`, default the racing timezone)."""
    return maintenance_settings().timezone


def plugin_package() -> str:
    """Package searched for plug-in executors by module name (`MAINTENANCE_PLUGIN_PACKAGE`)."""
    return maintenance_settings().plugin_package


def max_catchup_minutes() -> int:
    return maintenance_settings().max_catchup_minutes


def default_work_dir() -> str:
    """Where doc sync keeps its git caches between runs (`MAINTENANCE_WORK_DIR`)."""
    return maintenance_settings().work_dir
