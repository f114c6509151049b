"""The maintenance_jobs code location loads and exposes every job and sensor by name."""

from __future__ import annotations

import dagster as dg
import pytest

from maintenance_jobs.definitions import defs
from maintenance_jobs.resources import deployment_gitea
from maintenance_jobs.trigger import REQUIRED_ENV
from orchestration_core.run_config_rules import MissingSetting

pytestmark = pytest.mark.unit

JOBS = ["example_executor", "doc_sync_executor", "config_backup_executor", "postgres_backup_executor", "plugin_executor"]
SENSORS = ["maintenance_dispatcher", "maintenance_run_guard", "record_maintenance_success", "record_maintenance_failure",
           "record_maintenance_canceled", "maintenance_history_backfill"]


@pytest.mark.parametrize("name", JOBS)
def test_jobs_resolve_and_count_as_maintenance(name: str) -> None:
    job = defs.resolve_job_def(name)
    assert job.tags["orchestration/kind"] == "maintenance"  # the run queue's limit of 5 applies to every launch


@pytest.mark.parametrize("name", JOBS)
def test_each_job_runs_its_one_op_in_the_run_worker(name: str) -> None:
    """Under Dagster's default (multiprocess) executor the run worker started a second process for the one step,
    loading Dagster and the location again: 5.5 CPU-s a run instead of 3.0 (bench/maintenance_run_cpu.py)."""
    job = defs.resolve_job_def(name)
    assert len(job.nodes) == 1
    assert job.executor_def is dg.in_process_executor


@pytest.mark.parametrize("name", SENSORS)
def test_sensors_resolve_and_start_running(name: str) -> None:
    sensor = defs.resolve_sensor_def(name)
    assert sensor.default_status == dg.DefaultSensorStatus.RUNNING


def test_dispatcher_ticks_every_minute_and_targets_every_job() -> None:
    sensor = defs.resolve_sensor_def("maintenance_dispatcher")
    assert sensor.minimum_interval_seconds == 60
    assert sorted(t.job_name for t in sensor.targets) == sorted(JOBS)
    assert sensor.required_resource_keys == {"maintenance_registry"}


def test_resources_come_from_the_environment() -> None:
    repository = defs.get_repository_def()
    assert set(repository.get_top_level_resources()) >= {"maintenance_registry", "gitea"}
    assert defs.resolve_job_def("doc_sync_executor").required_resource_keys >= {"gitea"}


@pytest.mark.parametrize("missing", REQUIRED_ENV["doc_sync_executor"])
def test_the_triggers_up_front_env_check_matches_the_resources_env_vars(missing: str, monkeypatch) -> None:
    # The API refuses a manual trigger naming the unset variables (trigger.REQUIRED_ENV); the run worker builds the
    # Gitea resource from exactly those: each one missing fails the build naming it, all set builds it.
    for name in REQUIRED_ENV["doc_sync_executor"]:
        monkeypatch.setenv(name, "https://gitea.example" if name == "GITEA_URL" else "token-value")
    assert deployment_gitea().base_url == "https://gitea.example"
    monkeypatch.delenv(missing)
    with pytest.raises(MissingSetting, match=missing):
        deployment_gitea()
