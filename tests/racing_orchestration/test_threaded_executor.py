import time

import dagster as dg
import pytest

from tests.racing_orchestration import threaded_jobs


def _run(instance: dg.DagsterInstance, job, run_config: dict):
    return dg.execute_job(dg.reconstructable(job), instance=instance, run_config=run_config)


@pytest.mark.integration
@pytest.mark.parametrize(("threads", "max_expected_seconds"), [(8, 1.6), (1, None)])
def test_steps_run_concurrently_up_to_the_bound(pg_instance, threads, max_expected_seconds) -> None:
    width, sleep = 8, 0.3
    started = time.monotonic()
    result = _run(
        pg_instance,
        threaded_jobs.threaded_fan_out_job,
        {
            "ops": {"fan_out": {"config": {"width": width}}, "slow_item": {"config": {"sleep": sleep}}},
            "execution": {"config": {"max_concurrent": threads}},
        },
    )
    elapsed = time.monotonic() - started
    assert result.success
    items = [ev for ev in result.all_events if ev.event_type_value == "STEP_SUCCESS"]
    assert len(items) == width + 2
    outputs = [o for o in pg_instance.all_logs(result.run_id) if o.dagster_event and o.dagster_event.is_successful_output]
    assert len(outputs) == width + width + 1  # fan_out yields one output per item
    assert _max_overlap(pg_instance, result.run_id) == min(threads, width)
    if max_expected_seconds is not None:
        # Run set-up is included; strictly sequential steps would need width * sleep = 2.4 s on their own.
        assert elapsed < max_expected_seconds + 3


def _max_overlap(instance: dg.DagsterInstance, run_id: str) -> int:
    """The most slow_item steps that were running at the same moment, from the event log's timestamps."""
    marks = []
    for record in instance.all_logs(run_id):
        event = record.dagster_event
        if event is None or not (event.step_key or "").startswith("slow_item"):
            continue
        if event.event_type_value == "STEP_START":
            marks.append((record.timestamp, 1))
        elif event.event_type_value in ("STEP_SUCCESS", "STEP_FAILURE"):
            marks.append((record.timestamp, -1))
    running = peak = 0
    for _, delta in sorted(marks, key=lambda m: (m[0], m[1])):
        running += delta
        peak = max(peak, running)
    return peak


@pytest.mark.integration
def test_retry_requested_and_failures_are_step_events(pg_instance) -> None:
    result = _run(
        pg_instance,
        threaded_jobs.threaded_fan_out_job,
        {
            "ops": {"fan_out": {"config": {"width": 3}}, "slow_item": {"config": {"sleep": 0.01, "fail_on": 1}}},
        },
    )
    assert result.success
    types = [e.event_type_value for e in result.all_events]
    assert types.count("STEP_UP_FOR_RETRY") == 1
    assert types.count("STEP_RESTARTED") == 1

    failed = _run(pg_instance, threaded_jobs.threaded_failing_job, {})
    assert not failed.success
    failure = next(e for e in failed.all_events if e.event_type_value == "STEP_FAILURE")
    assert "boom in a thread" in failure.step_failure_data.error.cause.message
    assert pg_instance.get_run_by_id(failed.run_id).status == dg.DagsterRunStatus.FAILURE
