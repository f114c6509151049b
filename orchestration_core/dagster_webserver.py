"""Launching runs and reading what the code locations declare through the Dagster webserver's GraphQL API, the path
Dagster documents for other processes.

The webserver resolves the job in the code location that owns it, so the run carries that location's origin,
including the image its code server reports (DAGSTER_CURRENT_IMAGE): the Docker run launcher then starts the run
container from the right image. A run created by hand in the instance (without that origin) cannot be launched there.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import httpx

LAUNCH_RUN_MUTATION = """
mutation LaunchRun($executionParams: ExecutionParams!) {
  launchRun(executionParams: $executionParams) {
    __typename
    ... on LaunchRunSuccess { run { runId } }
    ... on RunConfigValidationInvalid { errors { message } }
    ... on PipelineNotFoundError { message }
    ... on RunConflict { message }
    ... on PresetNotFoundError { message }
    ... on ConflictingExecutionParamsError { message }
    ... on UnauthorizedError { message }
    ... on PythonError { message }
  }
}
"""


class WebserverUnavailable(RuntimeError):
    """The webserver could not be reached or answered with a server error: try again later."""


class LaunchRejected(RuntimeError):
    """The webserver answered but refused the launch (unknown job, invalid config, ...)."""


class QueryRejected(RuntimeError):
    """The webserver answered a query with GraphQL errors (a field this Dagster version does not know, ...)."""


@dataclass(frozen=True)
class DagsterWebserverClient:
    """GraphQL client of one Dagster webserver (`url` without the `/graphql` suffix)."""

    url: str
    timeout_seconds: float = 30.0

    def launch_run(
        self,
        *,
        location_name: str,
        repository_name: str,
        job_name: str,
        run_config: dict[str, Any],
        tags: dict[str, str],
    ) -> str:
        """Submit a run of `job_name` (queued by the instance's run coordinator) and return its id."""
        params = {
            "selector": {
                "repositoryLocationName": location_name,
                "repositoryName": repository_name,
                "jobName": job_name,
            },
            "runConfigData": run_config,
            "executionMetadata": {"tags": [{"key": k, "value": v} for k, v in sorted(tags.items())]},
        }
        response, body = self._post(LAUNCH_RUN_MUTATION, {"executionParams": params})
        if response.status_code >= 500 and not ((body or {}).get("data") or {}).get("launchRun"):
            raise WebserverUnavailable(f"Dagster webserver at {self.url} answered {response.status_code}")
        # A launchRun answer with a 500 is Dagster's PythonError (e.g. a resource's environment variable missing in
        # the code location): the webserver is up and refused this launch, with a message worth showing.
        return launched_run_id(body)

    def query(self, document: str, variables: dict[str, Any] | None = None) -> dict[str, Any]:
        """The `data` of a GraphQL query; WebserverUnavailable when the webserver cannot answer, QueryRejected when
        it answers with errors."""
        response, body = self._post(document, variables or {})
        if not isinstance(body, dict):
            raise WebserverUnavailable(f"Dagster webserver at {self.url} answered {type(body).__name__}, not an object")
        if body.get("errors"):
            raise QueryRejected("; ".join(str(e.get("message", e)) if isinstance(e, dict) else str(e)
                                          for e in body["errors"]))
        if response.status_code >= 400 or not isinstance(body.get("data"), dict):
            raise WebserverUnavailable(f"Dagster webserver at {self.url} answered {response.status_code} without data")
        return body["data"]


    def _post(self, document: str, variables: dict[str, Any]) -> tuple[httpx.Response, Any]:
        """POST one GraphQL document; the response and its JSON body, or WebserverUnavailable."""
        try:
            response = httpx.post(f"{self.url.rstrip('/')}/graphql", json={"query": document, "variables": variables},
                                  timeout=self.timeout_seconds)
        except httpx.HTTPError as exc:
            raise WebserverUnavailable(f"Dagster webserver at {self.url} unreachable: {exc}") from None
        try:
            return response, response.json()
        except ValueError:
            raise WebserverUnavailable(f"Dagster webserver at {self.url} answered non-JSON ({response.status_code})")


def launched_run_id(body: dict[str, Any]) -> str:
    """The run id of a `launchRun` answer, or LaunchRejected saying why not."""
    if body.get("errors"):
        raise LaunchRejected("; ".join(str(e.get("message", e)) for e in body["errors"]))
    result = (body.get("data") or {}).get("launchRun") or {}
    kind = result.get("__typename")
    if kind == "LaunchRunSuccess":
        return result["run"]["runId"]
    if kind == "RunConfigValidationInvalid":
        raise LaunchRejected("invalid run config: " + "; ".join(e["message"] for e in result.get("errors", [])))
    raise LaunchRejected(f"{kind or 'no result'}: {result.get('message', '')}".rstrip(": "))
