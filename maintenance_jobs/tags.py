"""Run tags of maintenance runs: what the UI, the REST API and the run status sensors read back."""

from __future__ import annotations

from orchestration_core.run_outcome import TAG_MAINTENANCE_TASK

TAG_TASK = TAG_MAINTENANCE_TASK  # the registry task the run executes
TAG_SERVICE = "maintenance/service"
TAG_EXECUTOR = "maintenance/executor"
TAG_TRIGGERED_BY = "maintenance/triggered_by"  # scheduler | manual | retry
TAG_PRIORITY = "maintenance/priority"  # the task's 1-100 priority (1 = most urgent)
TAG_SCHEDULED_MINUTE = "maintenance/scheduled_minute"  # local ISO minute the scheduler ran it for
TAG_OUTPUT = "maintenance/output"  # the executor's message (scrubbed, truncated)
# On a run re-launched for one that died for an infrastructure reason (lost_runs.py): the dead run's id, and how many
# re-launches its chain has had (copied to Dagster's retries of the re-launch, so the bound holds across both).
TAG_RELAUNCH_OF = "maintenance/relaunch_of"
TAG_RELAUNCH_NUMBER = "maintenance/relaunch_number"
# On a failed run the guard has decided: task_failure | dagster_retried | relaunched | reported (the reason is in
# racing/error), and the id of the run that verdict is about: Dagster's retries copy tags, so a copied one is ignored.
TAG_GUARD_VERDICT = "maintenance/guard_verdict"
TAG_GUARD_VERDICT_RUN = "maintenance/guard_verdict_run"
TAG_STATUS = "maintenance/status"  # success | failed | timeout | canceled, written when the run ends

TRIGGERED_BY = ("scheduler", "manual", "retry")
MAX_TAG_CHARS = 500
