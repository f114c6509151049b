"""`GET /executions?since=&until=` at the exact boundary instant, on each of its two sources: `since` is inclusive and
`until` exclusive, for a run still in Dagster's run storage (not recorded yet) and for one only the execution history
holds (recorded, then deleted by run retention). Runs one microsecond either side of the boundary pin the comparison
itself, not just the day."""

from __future__ import annotations

import datetime as dt

import dagster as dg
import pytest
from dagster._core.test_utils import create_run_for_test

from maintenance_jobs.execution_history import store
from maintenance_jobs.execution_history.recorder import record_run
from orchestration_core.postgres import create_engine
from tests.control_api.conftest import RunningApi
from tests.orchestration_core.audit.run_factory import backdate_finished_run

pytestmark = [pytest.mark.api, pytest.mark.integration]

BOUNDARY = dt.datetime(2026, 3, 10, 4, 0, tzinfo=dt.UTC)
MICROSECOND = dt.timedelta(microseconds=1)
OFFSETS = {"before": -MICROSECOND, "on": dt.timedelta(0), "after": MICROSECOND}


def run_created_at(instance: dg.DagsterInstance, created: dt.datetime) -> str:
    tags = {"orchestration/kind": "maintenance", "maintenance/task": "nightly", "maintenance/service": "scheduler",
            "maintenance/executor": "example_executor", "maintenance/triggered_by": "scheduler",
            "maintenance/priority": "50"}
    run_id = create_run_for_test(instance, job_name="example_executor", status=dg.DagsterRunStatus.SUCCESS,
                                 tags=tags).run_id
    backdate_finished_run(instance, run_id, created + dt.timedelta(seconds=30), duration_seconds=30)
    return run_id


@pytest.mark.parametrize("side", ["run-storage", "history"])
@pytest.mark.parametrize(("params", "expected"), [
    ({"since": BOUNDARY}, ["after", "on"]),
    ({"until": BOUNDARY}, ["before"]),
    ({"since": BOUNDARY, "until": BOUNDARY + MICROSECOND}, ["on"]),
    ({"since": BOUNDARY - MICROSECOND, "until": BOUNDARY}, ["before"]),
    # The same instants written with another offset select the same runs.
    ({"since": BOUNDARY.astimezone(dt.timezone(dt.timedelta(hours=13)))}, ["after", "on"]),
], ids=["since", "until", "since-until-on", "until-on", "since-offset"])
def test_a_run_on_the_boundary_is_in_since_and_out_of_until(api: RunningApi, side: str, params: dict,
                                                             expected: list[str]) -> None:
    runs = {name: run_created_at(api.instance, BOUNDARY + offset) for name, offset in OFFSETS.items()}
    if side == "history":
        engine = create_engine(api.registry_url, "registry")
        try:
            for run_id in runs.values():
                record_run(api.instance, api.instance.get_run_record_by_id(run_id), engine)
                api.instance.delete_run(run_id)  # retention: the history is now the only source
            with engine.connect() as conn:
                recorded = {row.run_id: row.triggered_at for row in conn.execute(store.task_executions.select())}
        finally:
            engine.dispose()
        assert recorded == {runs[name]: BOUNDARY + offset for name, offset in OFFSETS.items()}
    with api.client() as client:
        response = client.get("/executions", params={key: value.isoformat() for key, value in params.items()})
    assert response.status_code == 200, response.text
    by_run = {run_id: name for name, run_id in runs.items()}
    got = [by_run[item["run_id"]] for item in response.json()]
    assert got == expected
    assert all(item["recorded"] == (side == "history") for item in response.json())


@pytest.mark.parametrize("side", ["run-storage", "history"])
@pytest.mark.parametrize(("since", "until", "expected"), [
    (BOUNDARY, BOUNDARY + dt.timedelta(hours=1), ["on", "after"]),
    (BOUNDARY - dt.timedelta(hours=1), BOUNDARY, ["before"]),
    (BOUNDARY, BOUNDARY + MICROSECOND, ["on"]),
], ids=["since", "until", "on-only"])
def test_task_history_keeps_the_run_on_since_and_drops_the_one_on_until(api: RunningApi, side: str, since: dt.datetime,
                                                                        until: dt.datetime,
                                                                        expected: list[str]) -> None:
    from tests.task_rows import task_body

    runs = {name: run_created_at(api.instance, BOUNDARY + offset) for name, offset in OFFSETS.items()}
    if side == "history":
        engine = create_engine(api.registry_url, "registry")
        try:
            for run_id in runs.values():
                record_run(api.instance, api.instance.get_run_record_by_id(run_id), engine)
                api.instance.delete_run(run_id)
        finally:
            engine.dispose()
    with api.client() as client:
        assert client.post("/tasks", json=task_body("nightly")).status_code == 201
        response = client.get("/tasks/nightly/history", params={"since": since.isoformat(),
                                                                "until": until.isoformat()})
    assert response.status_code == 200, response.text
    body = response.json()
    assert body["expected_runs"] == []  # the task was created after the range: every run is an "other" run
    by_run = {run_id: name for name, run_id in runs.items()}
    assert [by_run[item["run_id"]] for item in body["other_runs"]] == expected
    assert all(item["recorded"] == (side == "history") for item in body["other_runs"])
