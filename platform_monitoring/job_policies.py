"""Each job's step retry policies: what the alert rules' grace and retry limits need and the webserver does not
publish (its GraphQL and Dagster's job snapshots carry no retry policy).

job_policies.json holds, per code location and job, the most retries any step's policy allows and the longest total
wait of any step's retries. It is written from the code locations' definitions by
`python -m tests.control_api.job_policies --write`, and tests/control_api/test_job_policies.py fails when it no
longer matches them, so it cannot drift from the code unseen. The writer's functions over a `dg.JobDefinition` are
in job_policies_from_code.py; this module only reads the file (the control API imports it, without Dagster).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

POLICIES_FILE = Path(__file__).with_name("job_policies.json")


@dataclass(frozen=True)
class JobPolicy:
    max_step_retries: int  # the most retries any of its steps' policies allows (0: none retries)
    retry_window_seconds: float  # the longest total wait of any step's retry policy (jitter at its largest)


def parse_policies(content: Mapping[str, Mapping[str, Mapping]]) -> dict[tuple[str, str], JobPolicy]:
    return {(location, job): JobPolicy(int(p["max_step_retries"]), float(p["retry_window_seconds"]))
            for location, jobs in content.items() for job, p in jobs.items()}


@lru_cache(maxsize=4)
def load_policies(path: Path = POLICIES_FILE) -> dict[tuple[str, str], JobPolicy]:
    """(location, job) -> its policy. A job missing from the file (new since it was written) counts as retrying
    nothing; the test that compares the file with the code fails first."""
    return parse_policies(json.loads(path.read_text()))
