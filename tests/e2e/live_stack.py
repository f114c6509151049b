"""Helpers of the live-stack tests: the `make run` stack on free ports, GraphQL and REST polling, leftovers."""

from __future__ import annotations

import os
import re
import time
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

import httpx

T = TypeVar("T")

RUNS_QUERY = """
query Runs($filter: RunsFilter, $limit: Int) {
  runsOrError(filter: $filter, limit: $limit) {
    __typename
    ... on Runs { results { runId jobName status creationTime startTime endTime tags { key value } } }
    ... on PythonError { message }
  }
}
"""


def wait_for(what: str, probe: Callable[[], T | None], timeout: float, interval: float = 2.0) -> T:
    """Poll `probe` until it returns something truthy; fail naming `what` after `timeout` seconds."""
    deadline = time.monotonic() + timeout
    last: T | None = None
    while time.monotonic() < deadline:
        last = probe()
        if last:
            return last
        time.sleep(interval)
    raise AssertionError(f"timed out after {timeout:.0f} s waiting for {what} (last: {last!r})")


def graphql_runs(dagster_url: str, run_filter: dict, limit: int = 50) -> list[dict]:
    response = httpx.post(f"{dagster_url}/graphql", json={"query": RUNS_QUERY,
                                                          "variables": {"filter": run_filter, "limit": limit}},
                          timeout=30)
    response.raise_for_status()
    payload = response.json()["data"]["runsOrError"]
    assert payload["__typename"] == "Runs", payload
    return payload["results"]


def tags_of(run: dict) -> dict[str, str]:
    return {t["key"]: t["value"] for t in run["tags"]}


def processes_mentioning(marker: str) -> list[str]:
    """Command lines of live processes whose environment or command line contains `marker` (e.g. DAGSTER_HOME)."""
    found = []
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit() or int(proc.name) == os.getpid():
            continue
        try:
            environ = (proc / "environ").read_bytes()
            cmdline = (proc / "cmdline").read_bytes()
            state = next((line for line in (proc / "status").read_text().splitlines() if line.startswith("State:")), "")
        except OSError:
            continue
        if "zombie" in state:
            continue
        if marker.encode() in environ or marker.encode() in cmdline:
            found.append(cmdline.replace(b"\0", b" ").decode(errors="replace"))
    return found


LOGS_QUERY = """
query Logs($runId: ID!) {
  logsForRun(runId: $runId) {
    __typename
    ... on EventConnection {
      events {
        __typename
        ... on MessageEvent { message stepKey level }
        ... on ExecutionStepFailureEvent { error { message } }
        ... on RunFailureEvent { error { message } }
        ... on EngineEvent { error { message } }
      }
    }
  }
}
"""


def run_events(dagster_url: str, run_id: str) -> list[dict]:
    response = httpx.post(f"{dagster_url}/graphql", json={"query": LOGS_QUERY, "variables": {"runId": run_id}},
                          timeout=30)
    return response.json()["data"]["logsForRun"].get("events", [])


def run_errors(dagster_url: str, run_id: str) -> list[str]:
    """The error-level messages of a run, to explain a failed run in an assertion message."""
    return [
        f"{e.get('stepKey') or ''} {e.get('message', '')} {(e.get('error') or {}).get('message', '')}".strip()
        for e in run_events(dagster_url, run_id)
        if e.get("level") in ("ERROR", "CRITICAL") or e.get("error")
    ]


def run_log(dagster_url: str, run_id: str) -> list[str]:
    """Every event of a run, one line each, to explain a run that ended without doing its work (e.g. a morning
    scrape SUCCESS with no outcome tag and no race stored, on a loaded host only)."""
    return [f"{e['__typename']} {e.get('stepKey') or ''} {e.get('message', '')}".strip()
            for e in run_events(dagster_url, run_id)]


# README's sections whose shell blocks run as written against the `make run` stack after `source .local/env`.
README_COMMAND_SECTIONS = ("## First ten minutes", "### Driving it from outside: GraphQL and the dagster CLI", "## CLI")
_SHELL_BLOCK = re.compile(r"^(?P<indent>[ \t]*)```(?:bash|sh|shell)\n(?P<body>.*?)^(?P=indent)```", re.M | re.S)


def readme_section(readme: str, heading: str) -> str:
    """The text under `heading` (a whole line) up to the next heading of the same or a higher level."""
    level = len(heading) - len(heading.lstrip("#"))
    lines = readme.splitlines(keepends=True)
    start = next(i for i, line in enumerate(lines) if line.rstrip("\n") == heading)
    end = next((i for i in range(start + 1, len(lines))
                if (hashes := len(lines[i]) - len(lines[i].lstrip("#"))) and hashes <= level
                and lines[i][hashes:hashes + 1] == " "), len(lines))
    return "".join(lines[start:end])


def shell_blocks(section: str) -> list[str]:
    """Each ```bash block of a section, as written (a list item's indent removed)."""
    return ["".join(line.removeprefix(m["indent"]) for line in m["body"].splitlines(keepends=True))
            for m in _SHELL_BLOCK.finditer(section)]
