"""Settings of the maintenance location that must be known when definitions load; secrets stay in `dg.EnvVar`."""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path

from orchestration_core.settings import racing_timezone

DEFAULT_PLUGIN_PACKAGE = "maintenance_jobs.plugins"
PLUGIN_ENTRY_POINT_GROUP = "maintenance_jobs.executors"
# Catch-up after downtime is bounded: older minutes are skipped (and reported) rather than flooding the queue.
DEFAULT_MAX_CATCHUP_MINUTES = 60


def maintenance_timezone() -> str:
    """IANA timezone the task cron fields are read in (`MAINTENANCE_TIMEZONE`, default the racing timezone)."""
    return os.environ.get("MAINTENANCE_TIMEZONE") or racing_timezone()


def plugin_package() -> str:
    """Package searched for plug-in executors by module name (`MAINTENANCE_PLUGIN_PACKAGE`)."""
    return os.environ.get("MAINTENANCE_PLUGIN_PACKAGE") or DEFAULT_PLUGIN_PACKAGE


def max_catchup_minutes() -> int:
    return int(os.environ.get("MAINTENANCE_MAX_CATCHUP_MINUTES") or DEFAULT_MAX_CATCHUP_MINUTES)


def default_work_dir() -> str:
    """Where doc sync keeps its git caches between runs (`MAINTENANCE_WORK_DIR`)."""
    return os.environ.get("MAINTENANCE_WORK_DIR") or str(Path.home() / ".cache" / "maintenance_jobs")


@dataclass(frozen=True)
class MaintenanceSettings:
    """The global settings handed to plug-in executors as `settings` (the old scheduler's `Settings`)."""

    timezone: str = field(default_factory=maintenance_timezone)
    work_dir: str = field(default_factory=default_work_dir)
    plugin_package: str = field(default_factory=plugin_package)


# --- What task configs may point at (hardening) --------------------------------------------------------------------
# Read on every validation (API writes and run start) so the API and run workers each apply their own environment.
DEFAULT_BACKUP_SOURCE_ROOTS = "/data"  # BACKUP_SOURCES_DIR, mounted read-only in run containers
DEFAULT_BACKUP_TARGET_ROOTS = "/backups"  # BACKUPS_DIR


def _csv_env(name: str, default: str = "") -> list[str]:
    return [item.strip() for item in (os.environ.get(name) or default).split(",") if item.strip()]


def backup_source_roots() -> tuple[Path, ...]:
    """Folders backup sources must resolve under (`MAINTENANCE_BACKUP_SOURCE_ROOTS`, comma-separated)."""
    return tuple(Path(p) for p in _csv_env("MAINTENANCE_BACKUP_SOURCE_ROOTS", DEFAULT_BACKUP_SOURCE_ROOTS))


def backup_target_roots() -> tuple[Path, ...]:
    """Folders a backup_dir must resolve under (`MAINTENANCE_BACKUP_TARGET_ROOTS`, comma-separated)."""
    return tuple(Path(p) for p in _csv_env("MAINTENANCE_BACKUP_TARGET_ROOTS", DEFAULT_BACKUP_TARGET_ROOTS))


def doc_sync_allowed_hosts() -> frozenset[str]:
    """Hosts doc sync may fetch from (`MAINTENANCE_DOC_SYNC_ALLOWED_HOSTS`, comma-separated); empty: any https host."""
    return frozenset(h.lower() for h in _csv_env("MAINTENANCE_DOC_SYNC_ALLOWED_HOSTS"))


def doc_sync_test_schemes() -> frozenset[str]:
    """FOR TESTS ONLY: extra upstream URL schemes doc sync accepts besides https (`MAINTENANCE_DOC_SYNC_TEST_SCHEMES`,
    e.g. "file,http" for local test repositories). Never set in a deployment."""
    return frozenset(s.lower() for s in _csv_env("MAINTENANCE_DOC_SYNC_TEST_SCHEMES"))
