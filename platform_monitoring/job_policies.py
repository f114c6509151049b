"""Each job's step retry policies: what the alert rules' grace and retry limits need and the webserver does not
publish (its GraphQL and Dagster's job snapshots carry no retry policy).

job_policies.json holds, per code location and job, the most retries any step's policy allows and the longest total
wait of any step's retries. It is written from the code locations' definitions by
`python -m tests.control_api.job_policies --write`, and tests/control_api/test_job_policies.py fails when it no
longer matches them, so it cannot drift from the code unseen. The functions over a `dg.JobDefinition` are what that
writer uses; this package itself only reads the file.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from dataclasses import asdict, dataclass
from functools import lru_cache
from pathlib import Path

import dagster as dg

POLICIES_FILE = Path(__file__).with_name("job_policies.json")


@dataclass(frozen=True)
class JobPolicy:
    max_step_retries: int  # the most retries any of its steps' policies allows (0: none retries)
    retry_window_seconds: float  # the longest total wait of any step's retry policy (jitter at its largest)


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


def parse_policies(content: Mapping[str, Mapping[str, Mapping]]) -> dict[tuple[str, str], JobPolicy]:
    return {(location, job): JobPolicy(int(p["max_step_retries"]), float(p["retry_window_seconds"]))
            for location, jobs in content.items() for job, p in jobs.items()}


@lru_cache(maxsize=4)
def load_policies(path: Path = POLICIES_FILE) -> dict[tuple[str, str], JobPolicy]:
    """(location, job) -> its policy. A job missing from the file (new since it was written) counts as retrying
    nothing; the test that compares the file with the code fails first."""
    return parse_policies(json.loads(path.read_text()))
