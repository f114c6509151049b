import time

import dagster as dg
import pytest

from tests.racing_orchestration import threaded_jobs


def _run(instance: dg.DagsterInstance, job, run_config: dict):
    return dg.execute_job(dg.reconstructable(job), instance=instance, run_config=run_config)


@pytest.mark.integration
@pytest.mark.parametrize("threads", [8, 4, 1])
def test_steps_run_concurrently_up_to_the_bound(pg_instance, threads) -> None:
    width = 8
    # Each step waits until `threads` steps run at once (a barrier, not a wall-clock bound, so a loaded machine is only
    # slower): the peak overlap proves both that the executor runs that many together and that it never runs more.
    config = {
        "ops": {"fan_out": {"config": {"width": width}}, "slow_item": {"config": {"sleep": 0.05, "meet": threads}}},
        "execution": {"config": {"max_concurrent": threads}},
    }
    with dg.execute_job(dg.reconstructable(threaded_jobs.threaded_fan_out_job), instance=pg_instance,
                        run_config=config) as result:
        assert result.success
        items = list(result.output_for_node("slow_item").values())
    steps = [ev for ev in result.all_events if ev.event_type_value == "STEP_SUCCESS"]
    assert len(steps) == width + 2
    outputs = [o for o in pg_instance.all_logs(result.run_id) if o.dagster_event and o.dagster_event.is_successful_output]
    assert len(outputs) == width + width + 1  # fan_out yields one output per item
    assert all(item["met"] for item in items)
    assert max_overlap([(item["started"], item["ended"]) for item in items]) == min(threads, width)


def max_overlap(intervals: list[tuple[float, float]]) -> int:
    """The most intervals open at one moment (an interval ending exactly when another starts does not overlap it)."""
    marks = sorted([(start, 1) for start, _ in intervals] + [(end, -1) for _, end in intervals])
    running = peak = 0
    for _, delta in marks:  # at equal times the end (-1) sorts first
        running += delta
        peak = max(peak, running)
    return peak


@pytest.mark.unit
@pytest.mark.parametrize(
    ("intervals", "peak"),
    [
        ([], 0),
        ([(0.0, 1.0), (1.0, 2.0), (2.0, 3.0)], 1),  # back to back
        ([(0.0, 3.0), (1.0, 2.0), (1.5, 4.0)], 3),
        ([(0.0, 1.0), (0.5, 2.0), (1.5, 3.0)], 2),
    ],
)
def test_max_overlap(intervals: list[tuple[float, float]], peak: int) -> None:
    assert max_overlap(intervals) == peak


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


@pytest.mark.integration
def test_mapped_steps_run_when_a_step_thread_reports_its_end_late(pg_instance, monkeypatch) -> None:
    # On a loaded host a step's thread can be descheduled between its last event (STEP_SUCCESS) and its own end. The
    # dynamic outputs of that step are resolved into mapped steps only when the executor processes the end, so a run
    # that looked "complete" in between once ended SUCCESS without running any mapped step (a morning scrape that
    # scraped nothing). The delay here stands in for that descheduling.
    _slow_step_thread_ends(monkeypatch)
    config = {"ops": {"fan_out": {"config": {"width": 3}}, "slow_item": {"config": {"sleep": 0.0}}}}
    with dg.execute_job(dg.reconstructable(threaded_jobs.threaded_fan_out_job), instance=pg_instance,
                        run_config=config) as result:
        assert result.success
        assert sorted(item["i"] for item in result.output_for_node("slow_item").values()) == [0, 1, 2]
        assert result.output_for_node("collect") == 3


@pytest.mark.integration
def test_a_step_retried_at_once_is_not_ended_by_its_earlier_attempt(pg_instance, monkeypatch) -> None:
    # A retry without a wait is relaunched while the thread of the attempt that asked for it may still be ending; that
    # late end must not be taken for the new attempt's (which would drop it as "finished without success or failure").
    _slow_step_thread_ends(monkeypatch)
    config = {"ops": {"fan_out": {"config": {"width": 2}},
                      "slow_item": {"config": {"sleep": 1.0, "fail_on": 1, "retry_wait": 0.0}}}}
    with dg.execute_job(dg.reconstructable(threaded_jobs.threaded_fan_out_job), instance=pg_instance,
                        run_config=config) as result:
        assert result.success
        items = sorted(result.output_for_node("slow_item").values(), key=lambda item: item["i"])
        assert [(item["i"], item["attempt"]) for item in items] == [(0, 0), (1, 1)]
        assert result.output_for_node("collect") == 2


def _slow_step_thread_ends(monkeypatch) -> None:
    """Each step's thread ends 0.5 s after its last event, as a descheduled thread on a loaded host would."""
    from racing_orchestration import threaded_executor

    original = threaded_executor.dagster_event_sequence_for_step

    def slow_to_finish(step_context):
        yield from original(step_context)
        time.sleep(0.5)

    monkeypatch.setattr(threaded_executor, "dagster_event_sequence_for_step", slow_to_finish)


@pytest.mark.integration
def test_a_crash_outside_a_steps_boundary_fails_the_run_with_the_error(pg_instance, monkeypatch) -> None:
    """Dagster's step sequence turns a step's own errors into STEP_FAILURE; anything raised around it (the framework
    itself) reaches the run, as with the in-process executor: the run fails and its failure carries the error."""
    from racing_orchestration import threaded_executor

    def crashes(step_context):
        raise RuntimeError("crashed outside the step's boundary")
        yield  # a generator, as Dagster's sequence is

    monkeypatch.setattr(threaded_executor, "dagster_event_sequence_for_step", crashes)
    result = _run(pg_instance, threaded_jobs.threaded_failing_job, {})
    assert not result.success
    assert pg_instance.get_run_by_id(result.run_id).status == dg.DagsterRunStatus.FAILURE
    failures = [e for e in result.all_events if e.event_type_value == "PIPELINE_FAILURE"]
    assert len(failures) == 1
    error = failures[0].job_failure_data.error
    assert "crashed outside the step's boundary" in (error.message + "".join(c.message for c in [error.cause] if c))


@pytest.mark.unit
def test_compute_log_keys_are_fresh_even_when_a_step_seeds_random() -> None:
    import random
    import re

    from racing_orchestration.threaded_executor import compute_log_file_key

    keys = []
    for _ in range(20):
        random.seed(7)
        keys.append(compute_log_file_key())
    assert all(re.fullmatch(r"[a-z]{8}", key) for key in keys)
    assert len(set(keys)) == 20
