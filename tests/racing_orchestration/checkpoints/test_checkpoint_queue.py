"""When runs queue up, the real QueuedRunCoordinator (dagster.yaml's concurrency block, on Postgres) launches the
checkpoint whose window closes soonest first: T-15, then T-60, then T+5, and every checkpoint before maintenance."""

from __future__ import annotations

import dagster as dg
import pytest
from dagster._core.errors import DagsterUserCodeUnreachableError

from maintenance_jobs.dispatch import dagster_priority
from racing_orchestration.checkpoints.jobs import CHECKPOINT_JOBS, PRIORITY_TAG
from tests.run_queue import dequeue, submit


@pytest.mark.unit
@pytest.mark.parametrize(("name", "priority"), [("t15", "120"), ("t60", "110"), ("post", "100")])
def test_each_checkpoint_job_carries_its_queue_priority(name, priority) -> None:
    assert CHECKPOINT_JOBS[name].tags[PRIORITY_TAG] == priority
    assert int(priority) > int(dagster_priority(1)) == 99  # the most urgent maintenance task


@pytest.mark.integration
def test_a_queue_of_checkpoints_launches_the_soonest_closing_first(mocked_launch_instance) -> None:
    """Arrival order as after loading a card whose T-60s had passed: the catch-up T-60s first, a T+5 and a priority-1
    maintenance task among them, the T-15 last. Each run for a different race (one run per race at a time)."""
    instance = mocked_launch_instance
    arrivals = [("t60", "race-a"), ("post", "race-b"), ("maintenance", "p1"), ("t60", "race-c"), ("t15", "race-d")]
    for name, label in arrivals:
        if name == "maintenance":
            submit(instance, "example_executor", {"orchestration/kind": "maintenance", "maintenance/task": label,
                                                  PRIORITY_TAG: dagster_priority(1)})
        else:
            submit(instance, CHECKPOINT_JOBS[name].name, {**CHECKPOINT_JOBS[name].tags, "racing/race_id": label})
    dequeue(instance)
    launched = [f"{run.tags['racing/checkpoint']}:{run.tags['racing/race_id']}" if "racing/checkpoint" in run.tags
                else run.tags["maintenance/task"] for run in instance.run_launcher.queue()]
    assert launched == ["t15:race-d", "t60:race-a", "t60:race-c", "post:race-b", "p1"]


def unreachable(context) -> None:
    """A launch that cannot reach the code server (what the code server's gRPC client raises)."""
    raise DagsterUserCodeUnreachableError("Could not reach user code server: connection refused")


@pytest.mark.integration
def test_a_checkpoint_run_whose_code_server_is_unreachable_waits_in_the_queue(mocked_launch_instance,
                                                                              monkeypatch) -> None:
    """A code server restarting (after a Postgres outage, seen in the outage test) made Dagster fail the dequeued run
    at once, costing the checkpoint one of its three re-requests; with dagster.yaml's queue settings the run goes back
    into the queue, 8 times at most, and is launched once the code server answers."""
    instance = mocked_launch_instance
    job = CHECKPOINT_JOBS["t15"]
    run_id = submit(instance, job.name, {**job.tags, "racing/race_id": "race-a"})
    launch = instance.run_launcher.launch_run

    monkeypatch.setattr(instance.run_launcher, "launch_run", unreachable)
    for attempt in range(8):  # each pass is a new daemon: no pause of the location carried over
        dequeue(instance)
        assert instance.get_run_by_id(run_id).status == dg.DagsterRunStatus.QUEUED, attempt
    assert instance.run_launcher.queue() == []
    monkeypatch.setattr(instance.run_launcher, "launch_run", launch)
    dequeue(instance)
    assert [run.run_id for run in instance.run_launcher.queue()] == [run_id]


@pytest.mark.integration
def test_a_code_server_unreachable_for_longer_fails_the_run_with_the_reason(mocked_launch_instance,
                                                                            monkeypatch) -> None:
    instance = mocked_launch_instance
    job = CHECKPOINT_JOBS["t60"]
    run_id = submit(instance, job.name, {**job.tags, "racing/race_id": "race-b"})

    monkeypatch.setattr(instance.run_launcher, "launch_run", unreachable)
    for _ in range(9):
        dequeue(instance)
    assert instance.get_run_by_id(run_id).status == dg.DagsterRunStatus.FAILURE
    messages = [entry.message for entry in instance.all_logs(run_id)]
    assert any("failed to reach the user code server after 8 attempts" in (m or "") for m in messages), messages
