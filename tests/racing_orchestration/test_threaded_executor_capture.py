"""The threadpool executor does what Dagster's in-process executor does beyond running steps: it captures the run's
stdout/stderr as compute logs (read back through the compute log manager, as the UI does) and it honours
`tag_concurrency_limits` on op tags."""

from __future__ import annotations

import sys
import time
from pathlib import Path

import dagster as dg
import pytest

from racing_orchestration.threaded_executor import threadpool_executor

pytestmark = pytest.mark.integration
WIDTH = 4  # mapped steps of limited_job


@dg.op(out=dg.DynamicOut(int))
def spread(context):
    for i in range(context.op_config["width"]):
        yield dg.DynamicOutput(i, mapping_key=f"n{i}")


@dg.op
def talk(i: int) -> int:
    print(f"stdout line of step {i}", flush=True)
    print(f"stderr line of step {i}", file=sys.stderr, flush=True)
    return i


@dg.op
def total(values: list[int]) -> int:
    return sum(values)


@dg.job(executor_def=threadpool_executor)
def talking_job():
    total(spread().map(talk).collect())


@dg.op(tags={"tab/api": "combinations"}, config_schema={"meet_in": dg.Field(str, default_value="")})
def limited(context, i: int) -> dict:
    """Holds 0.2 s; with `meet_in` (a folder) it first waits, at most 10 s, until every step of the run has started:
    steps the executor lets run at once then overlap however late a loaded machine starts their threads."""
    started = time.monotonic()
    if meet_in := context.op_config["meet_in"]:
        (Path(meet_in) / f"started-{i}").touch()
        while len(list(Path(meet_in).iterdir())) < WIDTH and time.monotonic() < started + 10:
            time.sleep(0.01)
    time.sleep(0.2)
    return {"started": started, "ended": time.monotonic()}


@dg.op
def spans(items: list[dict]) -> list[dict]:
    return items


@dg.job(executor_def=threadpool_executor)
def limited_job():
    spans(spread().map(limited).collect())


def max_overlap(intervals: list[dict]) -> int:
    """The largest number of intervals open at one instant."""
    edges = sorted([(i["started"], 1) for i in intervals] + [(i["ended"], -1) for i in intervals])
    open_now = peak = 0
    for _, delta in edges:
        open_now += delta
        peak = max(peak, open_now)
    return peak


def test_every_steps_output_is_in_the_runs_compute_log(pg_instance: dg.DagsterInstance) -> None:
    config = {"ops": {"spread": {"config": {"width": 4}}}, "execution": {"config": {"max_concurrent": 4}}}
    with dg.execute_job(dg.reconstructable(talking_job), instance=pg_instance, run_config=config) as result:
        assert result.success
        run_id = result.run_id
    captured = pg_instance.all_logs(run_id, of_type=dg.DagsterEventType.LOGS_CAPTURED)
    assert len(captured) == 1  # one capture for the whole run process, as the in-process executor does
    data = captured[0].dagster_event.event_specific_data
    assert data.step_keys == ["spread"]  # the steps known at the start; mapped steps appear as the run goes
    logs = pg_instance.compute_log_manager.get_log_data([run_id, "compute_logs", data.file_key])
    stdout, stderr = logs.stdout.decode(), logs.stderr.decode()
    assert all(f"stdout line of step {i}" in stdout for i in range(4)), stdout
    assert all(f"stderr line of step {i}" in stderr for i in range(4)), stderr


@pytest.mark.parametrize(("limits", "expected_peak"), [([{"key": "tab/api", "limit": 1}], 1), (None, 4)])
def test_tag_concurrency_limits_bound_the_tagged_steps(pg_instance, tmp_path, limits, expected_peak: int) -> None:
    execution = {"max_concurrent": 4} | ({"tag_concurrency_limits": limits} if limits else {})
    # Unlimited, the steps meet before they hold: all four overlap if the executor runs them at once (run one after
    # another, each would wait out its 10 s alone and the peak would be 1).
    meet_in = "" if limits else str(tmp_path)
    config = {"ops": {"spread": {"config": {"width": WIDTH}}, "limited": {"config": {"meet_in": meet_in}}},
              "execution": {"config": execution}}
    with dg.execute_job(dg.reconstructable(limited_job), instance=pg_instance, run_config=config) as result:
        assert result.success
        intervals = result.output_for_node("spans")
    # Without limits all four overlap (the measure can see overlap); with a limit of 1 none ever does.
    assert max_overlap(intervals) == expected_peak
