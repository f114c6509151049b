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
