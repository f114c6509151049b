"""maintenance_jobs/dispatch.py: what a task row becomes when it is launched: its job, run config, tags (the priority
the run queue dequeues by, the kind its limit of 5 counts) and the run key that launches a minute at most once."""

from __future__ import annotations

import datetime as dt
import json

import pytest

from maintenance_jobs.dispatch import (
    dagster_priority,
    job_and_op,
    run_config_for,
    run_key_for,
    run_tags_for,
    scheduled_run_request,
)
from maintenance_jobs.models import Task

pytestmark = pytest.mark.unit

MINUTE = dt.datetime(2025, 6, 2, 15, 5, tzinfo=dt.UTC)  # 03:05 NZST on 3 June


def task(executor: str = "example_executor", priority: int = 10, config: dict | None = None) -> Task:
    moment = dt.datetime(2025, 1, 1, tzinfo=dt.UTC)
    return Task(id=1, task_name="nightly_backup", service="postgres", executor=executor, priority=priority,
                config=config if config is not None else {"message": "hi"}, timeout_seconds=900, max_retries=2,
                created_at=moment, updated_at=moment)


@pytest.mark.parametrize(("priority", "dagster"), [(1, "99"), (50, "50"), (100, "0")])
def test_the_most_urgent_task_gets_dagsters_highest_priority(priority: int, dagster: str) -> None:
    assert dagster_priority(priority) == dagster


def test_a_more_urgent_task_is_dequeued_first() -> None:
    assert int(dagster_priority(1)) > int(dagster_priority(2)) > int(dagster_priority(100))


@pytest.mark.parametrize("triggered_by", ["scheduler", "manual", "retry"])
def test_run_tags(triggered_by: str) -> None:
    assert run_tags_for(task(), triggered_by) == {
        "maintenance/task": "nightly_backup",
        "maintenance/service": "postgres",
        "maintenance/executor": "example_executor",
        "maintenance/triggered_by": triggered_by,
        "maintenance/priority": "10",
        "orchestration/kind": "maintenance",  # what the run queue's limit of 5 counts
        "dagster/priority": "90",
        "dagster/max_runtime": "900",
        "dagster/max_retries": "2",
        "dagster/retry_on_asset_or_op_failure": "true",
    }


def test_an_unknown_trigger_is_refused() -> None:
    with pytest.raises(ValueError) as refused:
        run_tags_for(task(), "cron")
    assert str(refused.value) == "triggered_by must be one of ('scheduler', 'manual', 'retry'), not 'cron'"


def test_a_builtin_executor_gets_its_own_job_and_its_config_as_op_config() -> None:
    job, op = job_and_op("example_executor")
    assert (job.name, op) == ("example_executor", "run_example_executor")
    assert run_config_for(task()) == {"ops": {"run_example_executor": {"config": {"message": "hi"}}}}


def test_a_plugin_executor_runs_in_the_plugin_job_with_its_config_as_sorted_json() -> None:
    job, op = job_and_op("acme.cleanup")
    assert (job.name, op) == ("plugin_executor", "run_plugin_executor")
    config = run_config_for(task("acme.cleanup", config={"b": 1, "a": [2]}))
    assert config == {"ops": {"run_plugin_executor": {"config": {
        "executor": "acme.cleanup", "config_json": json.dumps({"a": [2], "b": 1})}}}}
    assert config["ops"]["run_plugin_executor"]["config"]["config_json"] == '{"a": [2], "b": 1}'


def test_the_run_key_names_the_task_and_its_local_minute() -> None:
    assert run_key_for("nightly_backup", MINUTE, "Pacific/Auckland") == "nightly_backup:2025-06-03T03:05+12:00"


def test_the_scheduled_request() -> None:
    request = scheduled_run_request(task(), MINUTE, "Pacific/Auckland")
    assert request.run_key == "nightly_backup:2025-06-03T03:05+12:00"
    assert request.job_name == "example_executor"
    assert request.run_config == {"ops": {"run_example_executor": {"config": {"message": "hi"}}}}
    assert request.tags == run_tags_for(task(), "scheduler") | {
        "maintenance/scheduled_minute": "2025-06-03T03:05+12:00"}
