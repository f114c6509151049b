"""The cleanup and the audit queries on Dagster's default (SQLite, run-sharded) storage: the fallback path."""

from __future__ import annotations

from datetime import timedelta

import dagster as dg
import pytest

from orchestration_core.audit.bulk_delete import InstanceRunDeleter, run_deleter_for
from orchestration_core.audit.cleanup import prune_successful_runs
from orchestration_core.audit.queries import outcome_counts, recent_runs, retry_chains
from tests.orchestration_core.audit.run_factory import RunFactory, audit_step_retry_job, compute_log_dir, event_count, partial_tags

pytestmark = pytest.mark.unit  # SQLite files only: no Postgres, no servers


def test_sqlite_instance_uses_delete_run_and_still_removes_logs() -> None:
    with dg.instance_for_test() as instance:
        assert isinstance(run_deleter_for(instance), InstanceRunDeleter)
        factory = RunFactory(instance)
        old = factory.executed(age_days=20)
        partial = factory.executed(tags=partial_tags(), age_days=20)
        assert compute_log_dir(instance, old.run_id).exists()

        report = prune_successful_runs(instance, 14)

        assert report.deleted == 1 and report.kept == {"partial": 1}
        assert instance.get_run_by_id(old.run_id) is None
        assert event_count(instance, old.run_id) == 0
        assert not compute_log_dir(instance, old.run_id).exists()
        assert compute_log_dir(instance, partial.run_id).exists()


def test_sqlite_audit_queries() -> None:
    with dg.instance_for_test() as instance:
        factory = RunFactory(instance)
        failed = factory.recorded(dg.DagsterRunStatus.FAILURE)
        factory.recorded(dg.DagsterRunStatus.SUCCESS, parent=failed)
        audit_step_retry_job.execute_in_process(instance=instance)
        assert len(recent_runs(instance, limit=10)) == 3
        assert {c.job_name: c.total for c in outcome_counts(instance, timedelta(hours=1))} == {
            "audit_sample_job": 2,
            "audit_step_retry_job": 1,
        }
        report = retry_chains(instance, timedelta(hours=1))
        assert [(g.job_name, g.retry_number, g.runs) for g in report.groups] == [("audit_sample_job", 1, 1)]
        assert report.step_retries_by_job == {"audit_step_retry_job": 1}
