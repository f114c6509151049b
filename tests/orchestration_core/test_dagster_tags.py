"""orchestration_core/dagster_tags.py and run_retries.py held to what Dagster really writes: its sensor daemon
creates a run from a RunRequest with a run key, the run fails, and its run-retry daemon (dagster.yaml's `run_retries`)
retries it. Each tag key the project declares is read off those runs, so a Dagster that renames one fails here.

Dagster's daemons are driven in-process (one iteration each, as tests/maintenance_jobs/test_lost_runs.py does) against
a real code server of tests/orchestration_core/tag_pin_definitions.py, on Postgres.
"""

from __future__ import annotations

import inspect
import logging
from collections.abc import Iterator
from types import SimpleNamespace

import dagster as dg
import pytest
import yaml

from orchestration_core.dagster_tags import (
    AUTO_RETRY_RUN_ID_TAG,
    PARENT_RUN_ID_TAG,
    RETRY_NUMBER_TAG,
    ROOT_RUN_ID_TAG,
    RUN_KEY_TAG,
    TAGS_TO_MAYBE_OMIT_ON_RETRY,
    WILL_RETRY_TAG,
)
from orchestration_core.run_retries import retry_consumer_cursor
from tests.code_server import module_workspace
from tests.conftest import REPO_ROOT, pooled_postgres_storage
from tests.orchestration_core.tag_pin_definitions import PIN_RUN_KEY

pytestmark = pytest.mark.integration

DAGSTER_YAML = yaml.safe_load((REPO_ROOT / "dagster.yaml").read_text())
SENTINEL = "set-on-the-failed-run"
# Tags put on the failed run before Dagster retries it, beside the ones Dagster writes itself (its run key, sensor
# name and tick; `dagster/will_retry` when the run fails). Written out here, not read from the module under test:
# the members of Dagster's omit-on-retry set that its retry can show (the rest cannot be seen through a retry:
# `dagster/retry_number` is overwritten by the retry's own, and a run with backfill tags whose backfill is not
# running is not retried at all), and tags any run may carry that a retry keeps.
TAGS_ON_THE_FAILED_RUN = {
    ".dagster/run_metrics": SENTINEL,
    "dagster/run_metrics": SENTINEL,
    "dagster/failure_reason": "RUN_EXCEPTION",  # parsed by the retry daemon: a real reason
    "dagster/is_resume_retry": SENTINEL,
    "dagster/auto_retry_run_id": SENTINEL,  # no such run: the daemon makes a retry and overwrites it
    "dagster/retry_strategy": "ALL_STEPS",  # a from-failure retry would set its own `dagster/is_resume_retry`
    "dagster/priority": "3",
    "pin/kept": SENTINEL,
}


@pytest.fixture(scope="module")
def instance(dagster_database_url: str) -> Iterator[dg.DagsterInstance]:
    """Postgres storage with dagster.yaml's run retries, and a run queue (a created run is queued, not executed)."""
    overrides = {
        "storage": pooled_postgres_storage(dagster_database_url),
        "run_coordinator": {"module": "dagster._core.run_coordinator", "class": "QueuedRunCoordinator"},
        "run_retries": DAGSTER_YAML["run_retries"],
    }
    with dg.instance_for_test(overrides=overrides) as inst:
        inst.wipe()
        inst.wipe_all_schedules()
        yield inst


@pytest.fixture(scope="module")
def retried(instance: dg.DagsterInstance) -> Iterator[SimpleNamespace]:
    """A run Dagster's sensor daemon created, failed, and retried by Dagster's retry daemon; with the failed run's
    tags as the retry daemon read them and its run-retry cursor before and after."""
    from dagster._daemon.auto_run_reexecution.event_log_consumer import EventLogConsumerDaemon
    from dagster._daemon.sensor import execute_sensor_iteration

    with module_workspace(instance, "tests.orchestration_core.tag_pin_definitions", "tag_pin") as workspace:
        retry_daemon = EventLogConsumerDaemon()
        list(retry_daemon.run_iteration(workspace))  # its first iteration sets its cursor: later failures count
        cursor_at_start = retry_consumer_cursor(instance)
        list(execute_sensor_iteration(workspace, logging.getLogger("test"), None, None))
        [run] = instance.get_runs(dg.RunsFilter(job_name="tag_pin_job"))
        instance.report_run_failed(run, "the run worker lost its database")
        instance.add_run_tags(run.run_id, TAGS_ON_THE_FAILED_RUN)
        failed_as_read = instance.get_run_by_id(run.run_id)
        [failure] = instance.fetch_run_status_changes(dg.DagsterEventType.RUN_FAILURE, limit=1).records
        list(retry_daemon.run_iteration(workspace))
        yield SimpleNamespace(
            created=run, failed_as_read=failed_as_read, failed=instance.get_run_by_id(run.run_id),
            retries=[r for r in instance.get_runs(dg.RunsFilter(job_name="tag_pin_job")) if r.run_id != run.run_id],
            cursor_at_start=cursor_at_start, cursor_after=retry_consumer_cursor(instance),
            failure_storage_id=failure.storage_id)


def the_retry(retried: SimpleNamespace) -> dg.DagsterRun:
    assert len(retried.retries) == 1, f"Dagster's retry daemon made {len(retried.retries)} retries, not 1"
    return retried.retries[0]


def test_the_sensor_daemon_stores_the_run_key_under_run_key_tag(retried: SimpleNamespace) -> None:
    assert retried.created.tags.get(RUN_KEY_TAG) == PIN_RUN_KEY, retried.created.tags


def test_a_failed_run_dagster_will_retry_carries_will_retry_tag(retried: SimpleNamespace) -> None:
    assert retried.failed_as_read.tags.get(WILL_RETRY_TAG) == "true", retried.failed_as_read.tags


def test_the_failed_run_names_its_retry_under_auto_retry_run_id_tag(retried: SimpleNamespace) -> None:
    assert retried.failed.tags.get(AUTO_RETRY_RUN_ID_TAG) == the_retry(retried).run_id, retried.failed.tags


@pytest.mark.parametrize(("key", "expected"), [(RETRY_NUMBER_TAG, "1"), (PARENT_RUN_ID_TAG, "failed"),
                                               (ROOT_RUN_ID_TAG, "failed")],
                         ids=["RETRY_NUMBER_TAG", "PARENT_RUN_ID_TAG", "ROOT_RUN_ID_TAG"])
def test_the_retry_carries_its_number_parent_and_root(retried: SimpleNamespace, key: str, expected: str) -> None:
    retry = the_retry(retried)
    assert retry.tags.get(key) == (retried.failed.run_id if expected == "failed" else expected), retry.tags


def test_the_retry_drops_exactly_the_failed_runs_tags_in_tags_to_maybe_omit_on_retry(retried: SimpleNamespace) -> None:
    """Every tag of the failed run: the retry has it with the same value unless it is in the project's set."""
    retry, failed_tags = the_retry(retried), retried.failed_as_read.tags
    assert {"dagster/will_retry", *TAGS_ON_THE_FAILED_RUN} <= set(failed_tags)
    not_carried = {key for key, value in failed_tags.items() if retry.tags.get(key) != value}
    assert not_carried == set(failed_tags) & TAGS_TO_MAYBE_OMIT_ON_RETRY


def test_retry_consumer_cursor_reads_the_retry_daemons_cursor(retried: SimpleNamespace) -> None:
    """None would make the maintenance guard wait 5 minutes for every promised retry instead of seeing it dropped."""
    assert retried.cursor_at_start is not None
    assert retried.cursor_after >= retried.failure_storage_id > retried.cursor_at_start


@pytest.mark.unit
def test_create_run_takes_what_the_guards_retry_passes() -> None:
    """orchestration_core/run_retries.retry_run_as_the_daemon_would calls DagsterInstance.create_run by keyword."""
    assert set(inspect.signature(dg.DagsterInstance.create_run).parameters) >= {
        "job_name", "run_id", "run_config", "status", "tags", "root_run_id", "parent_run_id", "step_keys_to_execute",
        "execution_plan_snapshot", "job_snapshot", "parent_job_snapshot", "asset_selection", "asset_check_selection",
        "resolved_op_selection", "op_selection", "remote_job_origin", "job_code_origin", "asset_graph"}
