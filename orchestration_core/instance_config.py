"""What the control API needs of the Dagster instance's configuration (`$DAGSTER_HOME/dagster.yaml`), read as plain
YAML so the API does not import Dagster: which daemons must beat, the run queue's tag limits, and run retries.

Dagster's rules, restated (DagsterInstance.get_required_daemon_types and its settings' defaults, dagster 1.13);
tests/orchestration_core/test_instance_config.py builds real instances from the same YAML and checks each answer
against Dagster's own, so an upgrade that changes a default fails there.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml


@dataclass(frozen=True)
class InstanceConfig:
    required_daemons: tuple[str, ...]  # daemon types whose heartbeats must be fresh
    queued: bool  # runs go through the queued run coordinator (its tag limits apply)
    tag_concurrency_limits: tuple[Mapping[str, Any], ...]  # {key, value, limit} as configured
    run_retries_max: int  # the instance's default max retries of a crashed run; 0 when run retries are off


def _section(config: Mapping[str, Any], name: str) -> Mapping[str, Any]:
    value = config.get(name)
    return value if isinstance(value, Mapping) else {}


def _class_name(config: Mapping[str, Any], name: str) -> str | None:
    return _section(config, name).get("class")


def instance_config(config: Mapping[str, Any] | None) -> InstanceConfig:
    """Pure: the parsed dagster.yaml (None or {}: Dagster's defaults) as the facts above."""
    config = config or {}
    coordinator = _class_name(config, "run_coordinator")
    queued = coordinator in (None, "QueuedRunCoordinator")
    scheduler = _class_name(config, "scheduler")
    run_retries = _section(config, "run_retries")
    auto_materialize = _section(config, "auto_materialize")
    daemons = ["SENSOR", "BACKFILL"]
    if scheduler in (None, "DagsterDaemonScheduler"):
        daemons.append("SCHEDULER")
    if queued:
        daemons.append("QUEUED_RUN_COORDINATOR")
    if _section(config, "run_monitoring").get("enabled", False):
        daemons.append("MONITORING")
    if run_retries.get("enabled", False):
        daemons.append("EVENT_LOG_CONSUMER")
    if auto_materialize.get("enabled", True) or auto_materialize.get("use_sensors", True):
        daemons.append("ASSET")
    if _section(config, "freshness").get("enabled", True):
        daemons.append("FRESHNESS_DAEMON")
    # The run queue's limits: `concurrency.runs` (the current form), else the coordinator's own config.
    limits = _section(_section(config, "concurrency"), "runs").get("tag_concurrency_limits")
    if limits is None:
        limits = _section(_section(config, "run_coordinator"), "config").get("tag_concurrency_limits")
    return InstanceConfig(
        required_daemons=tuple(daemons),
        queued=queued,
        tag_concurrency_limits=tuple(limit for limit in limits or () if isinstance(limit, Mapping)),
        run_retries_max=int(run_retries.get("max_retries", 0)) if run_retries.get("enabled", False) else 0,
    )


def read_instance_config(dagster_home: str | Path | None) -> InstanceConfig:
    """The facts of `<dagster_home>/dagster.yaml`; Dagster's defaults without a home or a file there."""
    if dagster_home is None:
        return instance_config(None)
    path = Path(dagster_home) / "dagster.yaml"
    if not path.is_file():
        return instance_config(None)
    return instance_config(yaml.safe_load(path.read_text()))
