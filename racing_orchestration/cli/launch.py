"""Manual runs through the run queue: `racing check` and `racing scrape` submit through the Dagster webserver's
GraphQL `launchRun`, as the sensors' runs are, so the instance's run coordinator queues them and its tag limits hold
(one run per `racing/race_id`: a manual re-fetch never races the sensor's run for the same race).

A queued run only starts when a daemon dequeues it, so submitting is refused, with what to do, when no daemon has
sent a QUEUED_RUN_COORDINATOR heartbeat recently; `--in-process` runs the job here instead (past the queue). While
the command waits for a queued run it keeps checking that heartbeat: a daemon that stops meanwhile would leave it
waiting for ever, so it returns (exit 3) saying the run is still queued and will start when a daemon is back.
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Mapping
from dataclasses import dataclass

import dagster as dg

from orchestration_core.dagster_webserver import DagsterWebserverClient, LaunchRejected, WebserverUnavailable
from orchestration_core.run_outcome import TAG_ERROR, outcome_of
from orchestration_core.settings import platform_settings

LOCATION_NAME = "racing_orchestration"  # workspace.yaml and deploy/workspace.yaml
REPOSITORY_NAME = "__repository__"  # the repository name of a `dg.Definitions` object
QUEUE_DAEMON = "QUEUED_RUN_COORDINATOR"
# The daemon beats every 30 s; two missed beats and it is not serving the queue.
MAX_HEARTBEAT_AGE_SECONDS = 90.0
POLL_SECONDS = 1.0
STALL_CHECK_SECONDS = 15.0  # how often a wait for a queued run re-reads the daemon heartbeats
EXIT_STILL_QUEUED = 3
WAITING = {dg.DagsterRunStatus.NOT_STARTED, dg.DagsterRunStatus.QUEUED}
FINISHED = {dg.DagsterRunStatus.SUCCESS, dg.DagsterRunStatus.FAILURE, dg.DagsterRunStatus.CANCELED}


def add_queue_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--in-process", action="store_true",
                        help="run the job in this process, past the run queue (for when no daemon serves the "
                        "instance; the queue's limits, e.g. one run per race, do not apply)")
    parser.add_argument("--detach", action="store_true",
                        help="queued runs: return once the run is submitted instead of waiting for it to finish")


def queue_served(heartbeats: Mapping[str, float], now: float, max_age: float = MAX_HEARTBEAT_AGE_SECONDS) -> bool:
    """Pure: whether a daemon dequeues runs (its QUEUED_RUN_COORDINATOR heartbeat, unix time, is recent)."""
    beat = heartbeats.get(QUEUE_DAEMON)
    return beat is not None and now - beat <= max_age


def no_daemon_message(command: str, heartbeats: Mapping[str, float], now: float) -> str:
    beat = heartbeats.get(QUEUE_DAEMON)
    seen = f"its last heartbeat was {now - beat:.0f} s ago" if beat is not None else "it has never sent a heartbeat"
    return (f"racing {command}: no Dagster daemon is serving the run queue of this instance ({seen}), so a queued "
            "run would never start. Start the daemon (`make run`, or `dagster-daemon run -w workspace.yaml` with "
            f"this DAGSTER_HOME), or run it here with `racing {command} ... --in-process` (past the queue: the "
            "one-run-per-race limit does not apply).")


def still_queued_message(command: str, run_id: str, url: str, heartbeats: Mapping[str, float], now: float) -> str:
    beat = heartbeats.get(QUEUE_DAEMON)
    seen = f"its last heartbeat was {now - beat:.0f} s ago" if beat is not None else "no heartbeat is recorded"
    return (f"racing {command}: run {run_id} is still queued and no Dagster daemon is serving the run queue any more "
            f"({seen}). The run stays queued and starts when a daemon is back; follow it at {url}, or cancel it there.")


@dataclass(frozen=True)
class QueuedRun:
    run_id: str
    status: str  # the Dagster run status when the command returned
    outcome: str  # orchestration_core.run_outcome's outcome (success / partial / failed / queued / ...)
    error: str
    url: str
    stalled: bool = False  # returned while the run was still queued, because no daemon served the queue any more


def submit(command: str, instance: dg.DagsterInstance, job_name: str, run_config: dict, tags: dict[str, str],
           *, detach: bool, ui_url: str | None = None) -> QueuedRun | None:
    """Queue one run of `job_name` through the webserver; wait for it unless `detach`. None (after saying why on
    stderr) when no daemon serves the queue or the webserver cannot take the run."""
    now = time.time()
    heartbeats = {kind: beat.timestamp for kind, beat in instance.get_daemon_heartbeats().items()}
    if not queue_served(heartbeats, now):
        print(no_daemon_message(command, heartbeats, now), file=sys.stderr)
        return None
    url = ui_url or platform_settings().dagster_ui_url
    client = DagsterWebserverClient(url)
    try:
        run_id = client.launch_run(location_name=LOCATION_NAME, repository_name=REPOSITORY_NAME, job_name=job_name,
                                   run_config=run_config, tags=tags)
    except WebserverUnavailable as exc:
        print(f"racing {command}: {exc}. Set DAGSTER_UI_URL to the webserver serving this instance, or use "
              "--in-process.", file=sys.stderr)
        return None
    except LaunchRejected as exc:
        print(f"racing {command}: the Dagster webserver refused the run: {exc}", file=sys.stderr)
        return None
    run_url = f"{url.rstrip('/')}/runs/{run_id}"
    print(f"queued run {run_id}: {run_url}", flush=True)
    run = instance.get_run_by_id(run_id)
    checked = time.monotonic()
    while not detach and run is not None and run.status not in FINISHED:
        time.sleep(POLL_SECONDS)
        run = instance.get_run_by_id(run_id)
        if run is not None and run.status in WAITING and time.monotonic() - checked >= STALL_CHECK_SECONDS:
            checked = time.monotonic()
            now = time.time()
            heartbeats = {kind: beat.timestamp for kind, beat in instance.get_daemon_heartbeats().items()}
            if not queue_served(heartbeats, now):
                print(still_queued_message(command, run_id, run_url, heartbeats, now), file=sys.stderr)
                return QueuedRun(run_id, run.status.value, "queued", "", run_url, stalled=True)
    if run is None:  # deleted meanwhile (retention); the launch itself succeeded
        return QueuedRun(run_id, "UNKNOWN", "unknown", "", run_url)
    return QueuedRun(run_id, run.status.value, outcome_of(run.status, run.tags), run.tags.get(TAG_ERROR, ""),
                     run_url)


def output_metadata(instance: dg.DagsterInstance, run_id: str) -> dict[str, object]:
    """The metadata the run's steps attached to their outputs (the checkpoint ops' summary), plain values."""
    found: dict[str, object] = {}
    for entry in instance.all_logs(run_id, of_type=dg.DagsterEventType.STEP_OUTPUT):
        data = entry.dagster_event.step_output_data if entry.dagster_event else None
        for key, value in (data.metadata if data is not None else {}).items():
            found[key] = getattr(value, "value", value)
    return found
