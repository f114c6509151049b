"""What the maintenance guard (maintenance_jobs/lost_runs.py) needs of Dagster's run retries: how far the daemon's
run-retry consumer has read, and a retry that consumer dropped, made the way the consumer makes one. Only public
DagsterInstance methods and the run tag keys of orchestration_core/dagster_tags.py are used; tests/maintenance_jobs/
test_lost_runs.py holds both to Dagster's real retry daemon.
"""

from __future__ import annotations

import dagster as dg

from orchestration_core.dagster_tags import (
    AUTO_RETRY_RUN_ID_TAG,
    PARENT_RUN_ID_TAG,
    RETRY_NUMBER_TAG,
    ROOT_RUN_ID_TAG,
    TAGS_TO_MAYBE_OMIT_ON_RETRY,
)

# Where EventLogConsumerDaemon keeps its RUN_FAILURE cursor (its `_create_cursor_key`; the event type's value is the
# old name "PIPELINE_FAILURE").
RETRY_CONSUMER_CURSOR_KEY = "EVENT_LOG_CONSUMER_CURSOR-PIPELINE_FAILURE"


def retry_consumer_cursor(instance: dg.DagsterInstance) -> int | None:
    """The event storage id up to which the daemon's run-retry consumer (EventLogConsumerDaemon) has read RUN_FAILURE
    events and decided on them; None before its first iteration. A failure at or below it is never looked at again."""
    key = RETRY_CONSUMER_CURSOR_KEY
    value = instance.daemon_cursor_storage.get_cursor_values({key}).get(key)
    return int(value) if value is not None else None


def retry_run_as_the_daemon_would(instance: dg.DagsterInstance, failed: dg.DagsterRun) -> dg.DagsterRun:
    """The automatic retry of `failed` that Dagster's daemon makes (dagster._daemon.auto_run_reexecution.retry_run):
    a re-execution in the failed run's group, with its tags (less those Dagster drops on a retry) plus
    `dagster/retry_number` (the group's size, which is how Dagster counts retries against `dagster/max_retries`),
    named on the failed run by `dagster/auto_retry_run_id`, and queued. Built from the failed run's stored job and
    plan snapshots (all its steps; maintenance jobs have one), so no code location is needed. Returns the retry that
    already exists instead when the daemon made one after all."""
    _, group = instance.get_run_group(failed.run_id)
    existing = next((run for run in group if run.parent_run_id == failed.run_id and RETRY_NUMBER_TAG in run.tags),
                    None)
    if existing is not None:
        if AUTO_RETRY_RUN_ID_TAG not in failed.tags:
            instance.add_run_tags(failed.run_id, {AUTO_RETRY_RUN_ID_TAG: existing.run_id})
        return existing
    root_run_id = failed.root_run_id or failed.run_id
    tags = {key: value for key, value in failed.tags.items() if key not in TAGS_TO_MAYBE_OMIT_ON_RETRY}
    tags |= {RETRY_NUMBER_TAG: str(len(group)), PARENT_RUN_ID_TAG: failed.run_id, ROOT_RUN_ID_TAG: root_run_id}
    retry = instance.create_run(
        job_name=failed.job_name, run_id=None, run_config=failed.run_config, status=dg.DagsterRunStatus.NOT_STARTED,
        tags=tags, root_run_id=root_run_id, parent_run_id=failed.run_id, step_keys_to_execute=None,
        execution_plan_snapshot=instance.get_execution_plan_snapshot(failed.execution_plan_snapshot_id),
        job_snapshot=instance.get_job_snapshot(failed.job_snapshot_id), parent_job_snapshot=None,
        asset_selection=failed.asset_selection, asset_check_selection=failed.asset_check_selection,
        resolved_op_selection=failed.resolved_op_selection, op_selection=failed.op_selection,
        remote_job_origin=failed.remote_job_origin, job_code_origin=failed.job_code_origin, asset_graph=None,
    )
    instance.add_run_tags(failed.run_id, {AUTO_RETRY_RUN_ID_TAG: retry.run_id})
    instance.report_engine_event("Retrying the run (Dagster's daemon passed its failure without the retry it "
                                 f"promised; made by the maintenance guard): run {retry.run_id}", failed)
    instance.report_engine_event(f"Launched as an automatic retry of failed run {failed.run_id}", retry)
    instance.submit_run(retry.run_id, workspace=None)
    return instance.get_run_by_id(retry.run_id)
