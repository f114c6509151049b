"""The step retry policies of job definitions, as job_policies.json records them: what
`python -m tests.control_api.job_policies --write` writes (job_policies.py reads the file, without Dagster)."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import asdict

import dagster as dg

from platform_monitoring.job_policies import JobPolicy


def retry_window_seconds(job: dg.JobDefinition) -> float:
    """The longest total wait of any step's retry policy in `job` (jitter at its largest)."""
    longest = 0.0
    for handle in job.graph.iterate_node_handles():
        policy = job.get_retry_policy_for_handle(handle)
        if policy is None or not policy.max_retries:
            continue
        delays = [dg.RetryPolicy(max_retries=policy.max_retries, delay=policy.delay, backoff=policy.backoff)
                  .calculate_delay(attempt) for attempt in range(1, policy.max_retries + 1)]
        jitter = (policy.delay or 0) * policy.max_retries if policy.jitter == dg.Jitter.PLUS_MINUS else 0
        longest = max(longest, sum(delays) + jitter)
    return longest


def max_step_retries(job: dg.JobDefinition) -> int:
    policies = (job.get_retry_policy_for_handle(handle) for handle in job.graph.iterate_node_handles())
    return max([p.max_retries for p in policies if p is not None], default=0)


def policies_of(jobs: Iterable[tuple[str, dg.JobDefinition]]) -> dict[str, dict[str, dict]]:
    """{location: {job: policy}} of (location, job definition) pairs: the content of job_policies.json."""
    found: dict[str, dict[str, dict]] = {}
    for location, job in jobs:
        found.setdefault(location, {})[job.name] = asdict(JobPolicy(max_step_retries(job),
                                                                       float(retry_window_seconds(job))))
    return {location: dict(sorted(items.items())) for location, items in sorted(found.items())}
