"""Settings of the maintenance location, from the environment (see orchestration_core.settings for the rules).

`MaintenanceSettings` is also what plug-in executors receive as `settings` (timezone, work_dir, plugin_package).
Secrets (the registry URL, the Gitea token) reach Dagster resources through `dg.EnvVar` only.
"""

from __future__ import annotations

from pathlib import Path

from typing import Annotated, Any

from pydantic import AliasChoices, Field, SecretStr, field_validator, model_validator
from pydantic_settings import NoDecode

from orchestration_core.settings import SettingsBase, racing_timezone

DEFAULT_PLUGIN_PACKAGE = "maintenance_jobs.plugins"
PLUGIN_ENTRY_POINT_GROUP = "maintenance_jobs.executors"
# Catch-up after downtime is bounded: older minutes are skipped (and reported) rather than flooding the queue.
DEFAULT_MAX_CATCHUP_MINUTES = 60
DEFAULT_BACKUP_SOURCE_ROOTS = "/data"  # BACKUP_SOURCES_DIR, mounted read-only in run containers
DEFAULT_BACKUP_TARGET_ROOTS = "/backups"  # BACKUPS_DIR


def _csv(value: str) -> list[str]:
    return [item.strip() for item in value.split(",") if item.strip()]


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
    # What task configs may point at. Read on every validation (API writes and run start), so the API and the run
    # workers each apply their own environment. Comma-separated in the environment.
    backup_source_roots: Annotated[tuple[Path, ...], NoDecode] = Field(
        (Path(DEFAULT_BACKUP_SOURCE_ROOTS),),
        validation_alias=_alias("backup_source_roots", "MAINTENANCE_BACKUP_SOURCE_ROOTS"),
        description="folders config-backup sources must resolve under (BACKUP_SOURCES_DIR is /data in compose)")
    backup_target_roots: Annotated[tuple[Path, ...], NoDecode] = Field(
        (Path(DEFAULT_BACKUP_TARGET_ROOTS),),
        validation_alias=_alias("backup_target_roots", "MAINTENANCE_BACKUP_TARGET_ROOTS"),
        description="folders a config backup's backup_dir must resolve under (BACKUPS_DIR is /backups in compose)")
    # Unset: the backup source and target roots.
    disk_usage_roots: Annotated[tuple[Path, ...] | None, NoDecode] = Field(
        None, validation_alias=_alias("disk_usage_roots", "MAINTENANCE_DISK_USAGE_ROOTS"),
        description="folders the disk_usage_executor plug-in may report on (default: the backup roots)")
    pg_bin_dir: Path | None = Field(
        None, validation_alias=_alias("pg_bin_dir", "MAINTENANCE_PG_BIN_DIR"),
        description="folder holding pg_dump and pg_restore for the Postgres backup (unset: the image's system paths)")
    doc_sync_allowed_hosts: Annotated[frozenset[str], NoDecode] = Field(
        frozenset(), validation_alias=_alias("doc_sync_allowed_hosts", "MAINTENANCE_DOC_SYNC_ALLOWED_HOSTS"),
        description="hosts doc sync may fetch from over https (empty: any https host)")
    doc_sync_max_fetch_bytes: int = Field(
        256 * 1024 * 1024, ge=1024, validation_alias=_alias("doc_sync_max_fetch_bytes",
                                                            "MAINTENANCE_DOC_SYNC_MAX_FETCH_BYTES"),
        description="bytes a doc sync may receive from an upstream in one fetch; the fetch is stopped above it")
    doc_sync_max_docs_bytes: int = Field(
        256 * 1024 * 1024, ge=1024, validation_alias=_alias("doc_sync_max_docs_bytes",
                                                           "MAINTENANCE_DOC_SYNC_MAX_DOCS_BYTES"),
        description="bytes (uncompressed) of the files a doc sync may mirror; a larger docs tree fails the run")
    doc_sync_test_schemes: Annotated[frozenset[str], NoDecode] = Field(
        frozenset(), validation_alias=_alias("doc_sync_test_schemes", "MAINTENANCE_DOC_SYNC_TEST_SCHEMES"),
        description="internal: FOR TESTS ONLY, extra upstream URL schemes (e.g. file) for local test repositories")

    @field_validator("backup_source_roots", "backup_target_roots", "disk_usage_roots", mode="before")
    @classmethod
    def _paths(cls, value: Any) -> Any:
        return tuple(Path(p) for p in _csv(value)) if isinstance(value, str) else value

    @field_validator("doc_sync_allowed_hosts", "doc_sync_test_schemes", mode="before")
    @classmethod
    def _lowercase_set(cls, value: Any) -> Any:
        return frozenset(item.lower() for item in _csv(value)) if isinstance(value, str) else value

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


def backup_source_roots() -> tuple[Path, ...]:
    """Folders backup sources must resolve under (`MAINTENANCE_BACKUP_SOURCE_ROOTS`, comma-separated)."""
    return maintenance_settings().backup_source_roots


def backup_target_roots() -> tuple[Path, ...]:
    """Folders a backup_dir must resolve under (`MAINTENANCE_BACKUP_TARGET_ROOTS`, comma-separated)."""
    return maintenance_settings().backup_target_roots


def disk_usage_roots() -> tuple[Path, ...]:
    """Folders the disk_usage_executor plug-in may report on (`MAINTENANCE_DISK_USAGE_ROOTS`, comma-separated;
    default: the backup source and target roots)."""
    current = maintenance_settings()
    return current.disk_usage_roots or (*current.backup_source_roots, *current.backup_target_roots)


def pg_bin_dir() -> Path | None:
    """Folder holding pg_dump and pg_restore (`MAINTENANCE_PG_BIN_DIR`); None: the system paths."""
    return maintenance_settings().pg_bin_dir


def doc_sync_allowed_hosts() -> frozenset[str]:
    """Hosts doc sync may fetch from (`MAINTENANCE_DOC_SYNC_ALLOWED_HOSTS`, comma-separated); empty: any https host."""
    return maintenance_settings().doc_sync_allowed_hosts


def doc_sync_test_schemes() -> frozenset[str]:
    """FOR TESTS ONLY: extra upstream URL schemes doc sync accepts besides https (`MAINTENANCE_DOC_SYNC_TEST_SCHEMES`,
    e.g. "file,http" for local test repositories). Never set in a deployment."""
    return maintenance_settings().doc_sync_test_schemes
