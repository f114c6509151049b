"""The GraphQL launch client: answers parsed into a run id or a refusal that says why; transport failures kept apart."""

from __future__ import annotations

import pytest

from local_stack.stack import free_port
from orchestration_core.dagster_webserver import (
    DagsterWebserverClient,
    LaunchRejected,
    WebserverUnavailable,
    launched_run_id,
)

pytestmark = pytest.mark.unit


def test_success_gives_the_run_id() -> None:
    body = {"data": {"launchRun": {"__typename": "LaunchRunSuccess", "run": {"runId": "abc"}}}}
    assert launched_run_id(body) == "abc"


@pytest.mark.parametrize(
    ("body", "says"),
    [
        ({"data": {"launchRun": {"__typename": "PipelineNotFoundError", "message": "no job x"}}}, "no job x"),
        ({"data": {"launchRun": {"__typename": "RunConfigValidationInvalid",
                                 "errors": [{"message": "bad field"}]}}}, "invalid run config: bad field"),
        ({"errors": [{"message": "Cannot query field"}]}, "Cannot query field"),
        ({"data": {"launchRun": {"__typename": "PythonError", "message": "boom"}}}, "PythonError: boom"),
        ({"data": None}, "no result"),
    ],
)
def test_refusals_say_why(body: dict, says: str) -> None:
    with pytest.raises(LaunchRejected, match=says):
        launched_run_id(body)


def test_a_closed_port_is_unavailable_not_rejected() -> None:
    client = DagsterWebserverClient(f"http://127.0.0.1:{free_port()}", timeout_seconds=2)
    with pytest.raises(WebserverUnavailable, match="unreachable"):
        client.launch_run(location_name="l", repository_name="r", job_name="j", run_config={}, tags={})
