"""Helpers of the live-stack tests: the `make run` stack on free ports, GraphQL and REST polling, leftovers."""

from __future__ import annotations

import contextlib
import dataclasses
import json
import os
import re
import shlex
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

import httpx

from local_stack.stack import LocalStack, StackOptions

T = TypeVar("T")

# One client for the live tests' requests, their polling above all: `httpx.get` and `httpx.post` build a client, with
# a TLS context that loads the CA bundle, for every call (~26-32 ms of CPU against ~1.3 ms here), and the live tests
# poll thousands of times a run. Each request still opens a connection of its own, as before: a kept one could meet a
# server closing it as idle (uvicorn after 5 s) just as a poll sends, an error no server made. Thread-safe.
HTTP = httpx.Client(timeout=30, limits=httpx.Limits(max_keepalive_connections=0))

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


# `make run`'s supervisor (local_stack/__main__.py) with the test's options: the stack's children and the supervisor
# write to one console, as in a terminal, and SIGINT to its process group stops it as Ctrl-C does.
SUPERVISOR = """
import json, sys
from pathlib import Path
from local_stack.__main__ import supervise
from local_stack.stack import StackOptions
options = json.loads(sys.argv[1])
sys.exit(supervise(StackOptions(**{**options, "data_dir": Path(options["data_dir"])})))
"""
# What a fresh terminal lacks and the suite's environment may carry: each would hide chatter `make run` must keep off.
NOT_IN_A_FRESH_TERMINAL = ("XDG_RUNTIME_DIR", "PYTHONWARNINGS")
STARTED = "Local stack is up"


class SupervisedStack:
    """The stack as `make run` runs it, in a process of its own whose console is `console` (a file): the URLs and
    `env_file` of LocalStack for the same options, and `env` (this process's environment and the env file's
    variables, as after `source .local/env`) once started."""

    def __init__(self, options: StackOptions, console: Path) -> None:
        self.options, self.console = options, console
        self.process: subprocess.Popen | None = None
        self.env: dict[str, str] = {}
        self.returncode: int | None = None
        addresses = LocalStack(options)
        self.dagster_url, self.api_url, self.env_file = addresses.dagster_url, addresses.api_url, addresses.env_file

    def start(self, timeout: float = 600) -> None:
        options = {**dataclasses.asdict(self.options), "data_dir": str(self.options.data_dir)}
        env = {name: value for name, value in os.environ.items() if name not in NOT_IN_A_FRESH_TERMINAL}
        with self.console.open("w") as out:
            self.process = subprocess.Popen([sys.executable, "-c", SUPERVISOR, json.dumps(options)], env=env,
                                            stdout=out, stderr=subprocess.STDOUT, start_new_session=True)
        wait_for("the stack's banner", lambda: STARTED in self.text() or self.process.poll() is not None, timeout)
        assert STARTED in self.text(), self.text()[-3000:]
        self.env = {**os.environ, **env_file_variables(self.env_file.read_text())}

    def text(self) -> str:
        return self.console.read_text(errors="replace")

    def stop(self, grace: float = 180) -> int | None:
        """Ctrl-C: SIGINT to the supervisor's process group; its exit status. A supervisor still running after `grace`
        s is killed with every process of the stack (each child leads a session of its own), and the status is
        the kill's."""
        if self.process is not None and self.returncode is None:
            os.killpg(self.process.pid, signal.SIGINT)
            try:
                self.returncode = self.process.wait(timeout=grace)
            except subprocess.TimeoutExpired:
                os.killpg(self.process.pid, signal.SIGKILL)
                self.returncode = self.process.wait(timeout=30)
                for pid in pids_mentioning(self.options.data_dir.as_posix()):
                    with contextlib.suppress(ProcessLookupError):  # ended meanwhile
                        os.kill(pid, signal.SIGKILL)
        return self.returncode


def env_file_variables(text: str) -> dict[str, str]:
    """The variables of `export NAME=value` lines (local_stack.stack.env_file_text), read back as a shell would."""
    variables = {}
    for line in text.splitlines():
        words = shlex.split(line, comments=True)
        if words[:1] == ["export"] and len(words) == 2:
            name, value = words[1].split("=", 1)
            variables[name] = value
    return variables


def graphql_runs(dagster_url: str, run_filter: dict, limit: int = 50) -> list[dict]:
    response = HTTP.post(f"{dagster_url}/graphql", json={"query": RUNS_QUERY,
                                                         "variables": {"filter": run_filter, "limit": limit}})
    response.raise_for_status()
    payload = response.json()["data"]["runsOrError"]
    assert payload["__typename"] == "Runs", payload
    return payload["results"]


def tags_of(run: dict) -> dict[str, str]:
    return {t["key"]: t["value"] for t in run["tags"]}


def processes_mentioning(marker: str) -> list[str]:
    """Command lines of live processes whose environment or command line contains `marker` (e.g. DAGSTER_HOME)."""
    return list(_processes_mentioning(marker).values())


def pids_mentioning(marker: str) -> list[int]:
    return list(_processes_mentioning(marker))


def _processes_mentioning(marker: str) -> dict[int, str]:
    found = {}
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
            found[int(proc.name)] = cmdline.replace(b"\0", b" ").decode(errors="replace")
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
    response = HTTP.post(f"{dagster_url}/graphql", json={"query": LOGS_QUERY, "variables": {"runId": run_id}})
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
