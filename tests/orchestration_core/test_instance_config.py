"""orchestration_core/instance_config.py against Dagster: for each dagster.yaml, the daemons that must beat, the
maintenance limit and the run retries the control API reads from the YAML are what a real instance built from the same
YAML says (so an upgrade that changes a default or a rule fails here)."""

from __future__ import annotations

import dagster as dg
import pytest
import yaml

from orchestration_core.instance_config import instance_config, read_instance_config
from platform_monitoring.status import DEFAULT_CONCURRENT_LIMIT, concurrent_limit
from tests.conftest import REPO_ROOT

MAINTENANCE_LIMIT = {"key": "orchestration/kind", "value": "maintenance", "limit": 3}
DEFAULT_COORDINATOR = {"module": "dagster._core.run_coordinator", "class": "DefaultRunCoordinator"}
QUEUED = {"module": "dagster._core.run_coordinator", "class": "QueuedRunCoordinator"}

CONFIGS = {
    "defaults": {},
    "queued_with_concurrency_limits": {"concurrency": {"runs": {"tag_concurrency_limits": [MAINTENANCE_LIMIT]}}},
    "queued_with_coordinator_limits": {"run_coordinator": {**QUEUED, "config": {
        "tag_concurrency_limits": [MAINTENANCE_LIMIT]}}},
    "default_coordinator": {"run_coordinator": DEFAULT_COORDINATOR},
    "monitoring_and_retries": {"run_monitoring": {"enabled": True}, "run_retries": {"enabled": True, "max_retries": 2}},
    "retries_off_with_a_max": {"run_retries": {"enabled": False, "max_retries": 4}},
    "no_asset_daemon": {"auto_materialize": {"enabled": False, "use_sensors": False}},
    "asset_sensors_only": {"auto_materialize": {"enabled": False}},
    "no_freshness": {"freshness": {"enabled": False}},
    "the_projects_dagster_yaml": {k: v for k, v in yaml.safe_load((REPO_ROOT / "dagster.yaml").read_text()).items()
                                  if k not in ("storage", "telemetry")},
}


def dagsters_answers(config: dict) -> tuple[tuple[str, ...], int, int]:
    with dg.instance_for_test(overrides=config) as instance:
        try:
            limits = instance.get_concurrency_config().run_queue_config.tag_concurrency_limits
            limit = next((int(x["limit"]) for x in limits if x.get("key") == "orchestration/kind"
                          and x.get("value") == "maintenance"), DEFAULT_CONCURRENT_LIMIT)
        except Exception:  # no queue config: what status.concurrent_limit has always answered then
            limit = DEFAULT_CONCURRENT_LIMIT
        retries = instance.run_retries_max_retries if instance.run_retries_enabled else 0
        return tuple(instance.get_required_daemon_types()), limit, retries


@pytest.mark.parametrize("name", sorted(CONFIGS))
def test_the_yaml_reading_agrees_with_a_real_instance(name: str) -> None:
    ours = instance_config(CONFIGS[name])
    required, limit, retries = dagsters_answers(CONFIGS[name])
    assert ours.required_daemons == required
    assert concurrent_limit(ours) == limit
    assert ours.run_retries_max == retries


def test_the_file_in_dagster_home_is_read(tmp_path) -> None:
    assert read_instance_config(None) == instance_config(None)
    assert read_instance_config(tmp_path) == instance_config(None)  # no dagster.yaml there: Dagster's defaults
    (tmp_path / "dagster.yaml").write_text(yaml.safe_dump(CONFIGS["monitoring_and_retries"]))
    assert read_instance_config(tmp_path).run_retries_max == 2
    assert "MONITORING" in read_instance_config(str(tmp_path)).required_daemons
