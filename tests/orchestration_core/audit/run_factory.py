"""Runs of every status and age, created through Dagster's APIs for the audit tests and the benchmark.

Back-dating is a test-only device: Dagster has no API to create a run in the past, so `backdate` rewrites the
`runs.create_timestamp` column (naive UTC, as Dagster stores it) with SQL.
"""

# No `from __future__ import annotations`: Dagster inspects the ops' context annotations at decoration time.

import os
from datetime import UTC, datetime, timedelta
from pathlib import Path

import dagster as dg
import sqlalchemy as sa
from dagster._core.remote_origin import InProcessCodeLocationOrigin, RemoteJobOrigin, RemoteRepositoryOrigin
from dagster._core.types.loadable_target_origin import LoadableTargetOrigin

from orchestration_core.run_outcome import Outcome, outcome_tags

TAG_PARENT = "dagster/parent_run_id"
TAG_ROOT = "dagster/root_run_id"
TAG_RETRY_NUMBER = "dagster/retry_number"
FLAG_ENV = "AUDIT_TEST_SUCCEED_FLAG"


@dg.op
def say_hello(context: dg.OpExecutionContext) -> None:
    print("captured stdout line for the compute log")
    context.log.info("hello from the audit sample job")


@dg.job
def audit_sample_job() -> None:
    say_hello()


@dg.op
def fail_until_flag() -> None:
    # Fails until the file named by the env var exists: a real re-execution can then recover it.
    if not Path(os.environ.get(FLAG_ENV, "/nonexistent")).exists():
        raise RuntimeError("upstream feed unavailable")


@dg.job
def audit_flaky_job() -> None:
    fail_until_flag()


@dg.op(retry_policy=dg.RetryPolicy(max_retries=2))
def fail_first_attempt(context: dg.OpExecutionContext) -> None:
    if context.retry_number == 0:
        raise RuntimeError("transient")


@dg.job
def audit_step_retry_job() -> None:
    fail_first_attempt()


@dg.job(name="doc_sync_executor")
def doc_sync_stand_in() -> None:
    """Runs named like the monthly doc sync's job (retention and its alert look at the name only)."""
    say_hello()


def remote_origin_for(job_name: str, location_name: str = "audit_tests") -> RemoteJobOrigin:
    """The code origin a launched run carries (queued runs require one); points at this module."""
    target = LoadableTargetOrigin(python_file=__file__, attribute="audit_sample_job")
    location = InProcessCodeLocationOrigin(loadable_target_origin=target, location_name=location_name)
    return RemoteJobOrigin(RemoteRepositoryOrigin(location, "__repository__"), job_name)


def partial_tags(processed: int = 8, failed: int = 2) -> dict[str, str]:
    return outcome_tags(Outcome.PARTIAL, processed, failed, "2 races failed")


def retry_tags(parent: dg.DagsterRun, retry_number: int = 1) -> dict[str, str]:
    """The group tags the daemon/UI re-execution path writes on a new run."""
    return {
        TAG_PARENT: parent.run_id,
        TAG_ROOT: parent.root_run_id or parent.run_id,
        TAG_RETRY_NUMBER: str(retry_number),
    }


class RunFactory:
    """Creates runs on one instance; every run it makes is remembered by id."""

    def __init__(self, instance: dg.DagsterInstance):
        self.instance = instance

    def executed(self, *, succeed: bool = True, tags: dict[str, str] | None = None, age_days: float = 0) -> dg.DagsterRun:
        """A run really executed in process (so it has events and compute-log files on disk)."""
        job = audit_sample_job if succeed else audit_flaky_job
        result = job.execute_in_process(instance=self.instance, tags=tags or {}, raise_on_error=False)
        self.backdate(result.run_id, age_days)
        return self.instance.get_run_by_id(result.run_id)

    def recorded(
        self,
        status: dg.DagsterRunStatus,
        *,
        tags: dict[str, str] | None = None,
        age_days: float = 0,
        parent: dg.DagsterRun | None = None,
        retry_number: int = 1,
        job: dg.JobDefinition = audit_sample_job,
    ) -> dg.DagsterRun:
        """A run created and driven to `status` by reporting the events a launcher would report."""
        all_tags = dict(tags or {})
        if parent is not None:
            all_tags.update(retry_tags(parent, retry_number))
        run = self.instance.create_run_for_job(
            job,
            status=dg.DagsterRunStatus.QUEUED if status == dg.DagsterRunStatus.QUEUED else None,
            remote_job_origin=remote_origin_for(job.name),
            tags=all_tags,
            parent_run_id=parent.run_id if parent else None,
            root_run_id=(parent.root_run_id or parent.run_id) if parent else None,
        )
        if status in (dg.DagsterRunStatus.STARTED, dg.DagsterRunStatus.SUCCESS, dg.DagsterRunStatus.FAILURE):
            self.report_event(run, dg.DagsterEventType.RUN_START)
        if status == dg.DagsterRunStatus.SUCCESS:
            self.report_event(run, dg.DagsterEventType.RUN_SUCCESS)
        elif status == dg.DagsterRunStatus.FAILURE:
            self.instance.report_run_failed(run, "step failed")
        elif status == dg.DagsterRunStatus.CANCELED:
            self.instance.report_run_canceled(run)
        self.backdate(run.run_id, age_days)
        return self.instance.get_run_by_id(run.run_id)

    def report_event(self, run: dg.DagsterRun, event_type: dg.DagsterEventType) -> None:
        event = dg.DagsterEvent(event_type_value=event_type.value, job_name=run.job_name)
        self.instance.report_dagster_event(event, run_id=run.run_id)

    def backdate(self, run_id: str, age_days: float) -> None:
        """TEST-ONLY: move a run's creation time into the past (Dagster has no API for it)."""
        if not age_days:
            return
        created = (datetime.now(UTC) - timedelta(days=age_days)).replace(tzinfo=None)
        backdate_runs(self.instance, [run_id], created)


def backdate_runs(instance: dg.DagsterInstance, run_ids: list[str], created_naive_utc: datetime) -> None:
    """TEST-ONLY: set `runs.create_timestamp` (naive UTC) for the given runs."""
    with instance.run_storage.connect() as conn:
        conn.execute(
            sa.text("UPDATE runs SET create_timestamp = :ts WHERE run_id = ANY(:ids)")
            if conn.dialect.name == "postgresql"
            else sa.text("UPDATE runs SET create_timestamp = :ts WHERE run_id IN :ids").bindparams(
                sa.bindparam("ids", expanding=True)
            ),
            {"ts": created_naive_utc, "ids": list(run_ids)},
        )
        if conn.in_transaction():
            conn.commit()


def backdate_finished_run(instance: dg.DagsterInstance, run_id: str, ended: datetime, duration_seconds: float = 60) -> None:
    """TEST-ONLY: move a finished run wholly into the past: created and started `duration_seconds` before `ended`."""
    started = ended - timedelta(seconds=duration_seconds)
    with instance.run_storage.connect() as conn:
        conn.execute(
            sa.text(
                "UPDATE runs SET create_timestamp = :created, update_timestamp = :ended_naive,"
                " start_time = :start, end_time = :end WHERE run_id = :run_id"
            ),
            {
                "created": started.astimezone(UTC).replace(tzinfo=None),
                "ended_naive": ended.astimezone(UTC).replace(tzinfo=None),
                "start": started.timestamp(),
                "end": ended.timestamp(),
                "run_id": run_id,
            },
        )
        if conn.in_transaction():
            conn.commit()


def event_count(instance: dg.DagsterInstance, run_id: str) -> int:
    return len(instance.all_logs(run_id))


def compute_log_dir(instance: dg.DagsterInstance, run_id: str) -> Path:
    """Where LocalComputeLogManager keeps a run's captured logs: <base_dir>/<run_id>/compute_logs/."""
    return Path(instance.compute_log_manager._base_dir) / run_id  # noqa: SLF001 (layout check in tests only)
