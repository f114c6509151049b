"""orchestration_core/run_status.py restates Dagster's run statuses by value: the same set as DagsterRunStatus."""

from __future__ import annotations

import dagster as dg
import pytest

from orchestration_core.run_status import ENDED, IN_PROGRESS, RunStatus, run_status, status_value


def test_the_statuses_are_dagsters() -> None:
    assert [s.value for s in RunStatus] == [s.value for s in dg.DagsterRunStatus]
    assert set(ENDED) | set(IN_PROGRESS) == set(RunStatus) and not set(ENDED) & set(IN_PROGRESS)


@pytest.mark.parametrize("status", list(dg.DagsterRunStatus))
def test_a_dagster_status_or_its_value_is_the_same_status(status: dg.DagsterRunStatus) -> None:
    assert run_status(status) is run_status(status.value) is RunStatus(status.value)
    assert status_value(status) == status.value


def test_an_unknown_value_is_refused() -> None:
    with pytest.raises(ValueError):
        run_status("RUNNING_LATE")
