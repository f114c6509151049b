"""Running one checkpoint now, outside the sensors (`racing check` and tests), as a recorded run of the same job."""

import time
from typing import NamedTuple

import dagster as dg

from racing_orchestration.checkpoints.fetch import TAG_CHECKPOINT, TAG_RACE_ID, TAG_TRIGGERED_BY
from racing_orchestration.checkpoints.jobs import checkpoint_run_config
from racing_orchestration.checkpoints.windows import checkpoint_spec
from orchestration_core.run_outcome import outcome_of


def resolved_checkpoint_job(job_name: str) -> dg.JobDefinition:
    """The job with its resources bound, as the code location defines it (reconstructable by module path)."""
    from racing_orchestration.definitions import defs

    return defs.resolve_job_def(job_name)


class CheckRun(NamedTuple):
    run_id: str
    success: bool
    outcome: str
    summary: dict
    error: str
    seconds: float


def manual_checkpoint_run(race_id: str, checkpoint: str,
                          post_race_delays: list[float] | None = None) -> tuple[str, dict, dict[str, str]]:
    """(job name, run config, tags) of a manual run of one race's checkpoint: tagged `racing/race_id`, so the run
    queue's one-run-per-race limit holds, and `racing/triggered_by=manual` (the ledger is left alone)."""
    spec = checkpoint_spec(checkpoint)
    run_config = checkpoint_run_config(race_id, spec.name)
    if post_race_delays is not None and not spec.pre_race:
        run_config["ops"]["check_race_result"]["config"]["retry_delays_seconds"] = post_race_delays
    return spec.job_name, run_config, {TAG_RACE_ID: race_id, TAG_CHECKPOINT: spec.name, TAG_TRIGGERED_BY: "manual"}


def run_checkpoint(instance: dg.DagsterInstance, race_id: str, checkpoint: str,
                   post_race_delays: list[float] | None = None) -> CheckRun:
    """Execute the checkpoint's job for one race in this process (past the run queue), tagged as a manual run."""
    spec = checkpoint_spec(checkpoint)
    _, run_config, tags = manual_checkpoint_run(race_id, checkpoint, post_race_delays)
    job = dg.build_reconstructable_job("racing_orchestration.checkpoints.runner", "resolved_checkpoint_job",
                                       reconstructable_args=(spec.job_name,))
    started = time.monotonic()
    with dg.execute_job(job, instance=instance, run_config=run_config, tags=tags, raise_on_error=False) as result:
        seconds = time.monotonic() - started
        node = "take_odds_snapshot" if spec.pre_race else "check_race_result"
        try:
            summary = result.output_for_node(node)
        except dg.DagsterError:
            summary = {}
        run = instance.get_run_by_id(result.run_id)
        return CheckRun(result.run_id, result.success, outcome_of(run.status, run.tags), summary,
                        run.tags.get("racing/error", ""), seconds)
