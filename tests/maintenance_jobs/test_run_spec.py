"""maintenance_jobs/run_spec.py names the jobs and ops of jobs.py without importing them: the names agree."""

from __future__ import annotations

import pytest

from maintenance_jobs import jobs, run_spec


def test_every_builtin_executor_names_its_job_and_op() -> None:
    assert set(run_spec.BUILTIN_JOBS) == set(jobs.BUILTIN_JOBS)
    for executor, (job, op) in jobs.BUILTIN_JOBS.items():
        assert run_spec.BUILTIN_JOBS[executor] == (job.name, op)
        assert op in {node.name for node in job.graph.nodes}


@pytest.mark.parametrize("executor", ["disk_usage_executor", "some_plugin"])
def test_plugins_run_in_the_plugin_job(executor: str) -> None:
    job, op = jobs.PLUGIN_JOB
    assert run_spec.job_and_op_names(executor) == (job.name, op) == run_spec.PLUGIN_JOB
