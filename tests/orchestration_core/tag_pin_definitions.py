"""A code location for tests/orchestration_core/test_dagster_tags.py: one job, and a sensor (running by default) that
requests one run of it under a run key, so Dagster's own sensor daemon creates the run."""

import dagster as dg

PIN_RUN_KEY = "tag-pin:run-key"


@dg.op
def do_nothing() -> None:
    pass


@dg.job
def tag_pin_job() -> None:
    do_nothing()


@dg.sensor(job=tag_pin_job, minimum_interval_seconds=1, default_status=dg.DefaultSensorStatus.RUNNING)
def tag_pin_sensor():
    yield dg.RunRequest(run_key=PIN_RUN_KEY)


defs = dg.Definitions(jobs=[tag_pin_job], sensors=[tag_pin_sensor])
