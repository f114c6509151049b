"""What the code locations declare, read from their definitions in this (test) process: the reference the webserver's
catalog and platform_monitoring/job_policies.json are checked against.

`python -m tests.control_api.job_policies --write` rewrites job_policies.json from the definitions.
"""

from __future__ import annotations

import importlib
import json
import sys

from platform_monitoring.catalog import Definition, Job
from platform_monitoring.job_policies import POLICIES_FILE
from platform_monitoring.job_policies_from_code import policies_of

LOCATIONS = {"racing_orchestration": "racing_orchestration.definitions",
             "maintenance_jobs": "maintenance_jobs.definitions"}


def repositories():
    for location, module in LOCATIONS.items():
        yield location, importlib.import_module(module).defs.get_repository_def()


def code_definitions() -> tuple[Definition, ...]:
    """Every schedule and sensor as catalog.py's Definition, from the code."""
    found = []
    for location, repository in repositories():
        for s in repository.schedule_defs:
            cron = s.cron_schedule if isinstance(s.cron_schedule, str) else tuple(s.cron_schedule)
            metadata = {k: float(getattr(v, "value", v)) for k, v in s.metadata.items()
                        if isinstance(getattr(v, "value", v), int | float)}
            found.append(Definition(location, repository.name, "schedule", s.name, s.default_status.value == "RUNNING",
                                    cron_schedule=cron, timezone=s.execution_timezone or "UTC", job_name=s.job_name,
                                    metadata=metadata))
        found += [Definition(location, repository.name, "sensor", s.name, s.default_status.value == "RUNNING",
                             minimum_interval_seconds=s.minimum_interval_seconds or 30)
                  for s in repository.sensor_defs]
    return tuple(sorted(found, key=lambda d: (d.location, d.kind, d.name)))


def code_jobs() -> tuple[Job, ...]:
    return tuple(sorted((Job(location, job.name, {k: str(v) for k, v in job.tags.items()})
                         for location, repository in repositories() for job in repository.get_all_jobs()),
                        key=lambda j: (j.location, j.name)))


def code_policies() -> dict:
    return policies_of((location, job) for location, repository in repositories() for job in repository.get_all_jobs())


def policies_text() -> str:
    return json.dumps(code_policies(), indent=2, sort_keys=True) + "\n"


if __name__ == "__main__":
    if sys.argv[1:] != ["--write"]:
        sys.exit("usage: python -m tests.control_api.job_policies --write")
    POLICIES_FILE.write_text(policies_text())
    print(f"wrote {POLICIES_FILE}")
