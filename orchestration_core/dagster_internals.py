"""Every private Dagster API the project uses outside the threadpool executor, in one place.

Dagster's run and event-log tables are read directly where its public API has no equivalent at the speed needed
(the control API's /executions, /stats and /metrics pages; bulk run retention), and the schedule storage's selector
types are used to read schedule and sensor state and their ticks, and the control API pings the code servers over
Dagster's gRPC API. The maintenance guard reads how far the daemon's run-retry consumer has read, and makes a retry
that consumer dropped the way the consumer makes one. The code locations make the gRPC code server start each run's
worker from a process that has loaded them once, keep its check of ended workers alive through a database outage,
and end it when its client is gone rather than on a few missed heartbeats (`configure_code_server`). Each name here
is checked by tests/orchestration_core/test_dagster_internals.py, so an upgrade that moves or changes one fails there,
loudly, not somewhere in a page. The only other module reaching into `dagster._` is
racing_orchestration/threaded_executor.py.
"""

from __future__ import annotations

import logging
import multiprocessing
import os
import time
import weakref

import dagster as dg
from dagster._core.definitions.selector import InstigatorSelector
from dagster._core.scheduler.instigation import (
    InstigatorStatus,
    InstigatorTick,
    ScheduleInstigatorData,
    SensorInstigatorData,
    TickData,
    TickStatus,
)
from dagster._core.storage.event_log.schema import (
    AssetEventTagsTable,
    ConcurrencySlotsTable,
    PendingStepsTable,
    SqlEventLogStorageTable,
)
from dagster._core.storage.event_log.sql_event_log import SqlEventLogStorage
from dagster._core.storage.runs.schema import RunsTable, RunTagsTable
from dagster._core.storage.runs.sql_run_storage import SqlRunStorage
from dagster._core.storage.schedules.schema import JobTickTable
from dagster._core.storage.tags import (
    AUTO_RETRY_RUN_ID_TAG,
    PARENT_RUN_ID_TAG,
    RETRY_NUMBER_TAG,
    ROOT_RUN_ID_TAG,
    RUN_KEY_TAG,
    TAGS_TO_MAYBE_OMIT_ON_RETRY,
    WILL_RETRY_TAG,
)
from dagster._grpc.client import DagsterGrpcClient
from dagster._grpc.__generated__ import dagster_api_pb2
from dagster._grpc.server import DagsterApiServer

__all__ = [
    "AUTO_RETRY_RUN_ID_TAG",
    "RETRY_NUMBER_TAG",
    "RUN_KEY_TAG",
    "WILL_RETRY_TAG",
    "AssetEventTagsTable",
    "ConcurrencySlotsTable",
    "InstigatorSelector",
    "InstigatorStatus",
    "InstigatorTick",
    "JobTickTable",
    "PendingStepsTable",
    "RunTagsTable",
    "RunsTable",
    "ScheduleInstigatorData",
    "SensorInstigatorData",
    "SqlEventLogStorage",
    "SqlEventLogStorageTable",
    "SqlRunStorage",
    "TickData",
    "TickStatus",
    "configure_code_server",
    "ping_code_server",
    "retry_consumer_cursor",
    "retry_run_as_the_daemon_would",
]


def ping_code_server(host: str, port: int, timeout_seconds: int) -> None:
    """One gRPC Ping of a code server (what `dagster api grpc-health-check` asks, with a timeout of our own; the
    public `ping` waits Dagster's default 60 s). Raises on no answer."""
    client = DagsterGrpcClient(port=port, host=host)
    client._query("Ping", dagster_api_pb2.PingRequest, timeout=timeout_seconds, echo="control-api")


class RunWorkersFromPreloaded:
    """What Dagster's gRPC code server (DagsterApiServer) starts each run's worker process with, its `_mp_ctx`: a
    multiprocessing forkserver that imported the code location once, so each run's worker is a fork of it. Dagster's
    own `spawn` starts a fresh interpreter that imports Dagster and the location again for every run: ~3 CPU-s a run
    (bench/run_worker_start.py), seconds of a checkpoint's lead on a loaded host. The forkserver starts with the first
    run, with the code server's environment and `sys.path`, and exits with the code server; it loads nothing else and
    opens no connection, so each worker still builds its own instance and storage.

    A data descriptor on the class: it wins over the `spawn` context DagsterApiServer.__init__ stores on the instance
    before it imports the location, whose import installs this (`configure_code_server`)."""

    def __init__(self, module: str) -> None:
        self.module = module

    def __get__(self, server: object, owner: type | None = None) -> object:
        if server is None:
            return self
        context = multiprocessing.get_context("forkserver")
        context.set_forkserver_preload([self.module])  # read once, when the first run starts the forkserver
        return context

    def __set__(self, server: object, value: object) -> None:
        """DagsterApiServer.__init__'s `spawn` context, replaced by the forkserver above."""


_dagster_check_for_orphaned_runs = DagsterApiServer._check_for_orphaned_runs  # noqa: SLF001
code_server_log = logging.getLogger("dagster.code_server")


# The code servers (one per process) whose last check of ended workers failed: the next asks the storage first.
_CHECK_FAILED: weakref.WeakSet = weakref.WeakSet()


def check_ended_workers_until_it_succeeds(server: DagsterApiServer) -> None:
    """DagsterApiServer's check of its run workers, every 0.5 s in its cleanup thread: a worker that ended is looked
    up in the run storage, its run reported failed if it had not finished, and once the server was told to shut down
    and no worker is left, the server ends. Dagster lets any error of that check end the thread: a worker that ended
    while Postgres was down (the lookup gives up after ~10 s of retries) left its run STARTED and a server that, told to
    shut down, refused every run and never exited. Here an error is logged and the check runs
    again on the next tick, so both happen once Postgres is back. After a failed check, the storage is asked first
    outside the server's execution lock (which Dagster's check holds through its retries, and StartRun waits for), so
    an outage does not hold that lock; a check that passed is not asked twice."""
    try:
        if server in _CHECK_FAILED:
            ended = [(run_id, ref) for run_id, (process, ref) in list(server._executions.items())  # noqa: SLF001
                     if not process.is_alive()]
            if ended:
                run_id, instance_ref = ended[0]
                with dg.DagsterInstance.from_ref(instance_ref) as instance:
                    instance.get_run_by_id(run_id)
        _dagster_check_for_orphaned_runs(server)
        _CHECK_FAILED.discard(server)
    except Exception:  # noqa: BLE001 - whatever it was, the next tick tries again; the thread must live
        _CHECK_FAILED.add(server)
        code_server_log.warning("Could not check the run workers that ended; trying again", exc_info=True)


# How many heartbeat timeouts without a heartbeat, while the process that started the server lives, before the server
# takes itself for abandoned: 10 x `dagster code-server start`'s 30 s (DAGSTER_GRPC_PROXY_HEARTBEAT_TTL_SECONDS).
PATIENT_HEARTBEAT_TIMEOUTS = 10


def shut_down_once_abandoned(server: DagsterApiServer, heartbeat_timeout: float) -> None:
    """DagsterApiServer's heartbeat thread. Dagster's shuts the server down after one timeout (30 s under `dagster
    code-server start`) without a heartbeat, for a client that died without saying so. But a server starved of CPU or
    with every gRPC thread held by calls that wait on a stopped Postgres misses heartbeats too, and the proxy of
    `dagster code-server start` (the production command; `dagster dev` runs it too) never replaces a server that ended:
    the location stayed unreachable for good, its runs refused meanwhile ("Tried to start a run on a server after
    telling it to shut down"). Here the server stops as soon as the process that started it (the client that sends
    the heartbeats) is gone, and otherwise only after PATIENT_HEARTBEAT_TIMEOUTS timeouts without a heartbeat."""
    parent = os.getppid()
    shutdown = server._shutdown_once_executions_finish_event  # noqa: SLF001
    while not shutdown.wait(heartbeat_timeout):
        silent_for = time.time() - server._DagsterApiServer__last_heartbeat_time  # noqa: SLF001
        if os.getppid() != parent:
            code_server_log.warning("The process that started this code server (pid %s) is gone, shutting down",
                                    parent)
        elif silent_for > PATIENT_HEARTBEAT_TIMEOUTS * heartbeat_timeout:
            code_server_log.warning("No heartbeat received in %.0f seconds, shutting down", silent_for)
        else:
            continue
        shutdown.set()


def configure_code_server(module: str) -> None:
    """How the gRPC code server that loads `module` (a code location's definitions) serves: each run's worker is a
    fork of a process that imported `module` once (RunWorkersFromPreloaded), the check of ended workers lives through
    a database outage (check_ended_workers_until_it_succeeds), and a server whose client lives is not ended by missed
    heartbeats (shut_down_once_abandoned). Only DagsterApiServer changes: a process that serves no code server never
    uses any of it. Called by the definitions module, which the server imports before it starts these threads."""
    DagsterApiServer._mp_ctx = RunWorkersFromPreloaded(module)  # noqa: SLF001 - Dagster has no setting for these
    DagsterApiServer._check_for_orphaned_runs = check_ended_workers_until_it_succeeds  # noqa: SLF001
    DagsterApiServer._heartbeat_thread = shut_down_once_abandoned  # noqa: SLF001


# Where EventLogConsumerDaemon keeps its RUN_FAILURE cursor (its `_create_cursor_key`; the event type's value is the
# old name "PIPELINE_FAILURE").
RETRY_CONSUMER_CURSOR_KEY = "EVENT_LOG_CONSUMER_CURSOR-PIPELINE_FAILURE"


def retry_consumer_cursor(instance: dg.DagsterInstance) -> int | None:
    """The event storage id up to which the daemon's run-retry consumer (EventLogConsumerDaemon) has read RUN_FAILURE
    events and decided on them; None before its first iteration. A failure at or below it is never looked at again."""
    key = RETRY_CONSUMER_CURSOR_KEY
    value = instance.daemon_cursor_storage.get_cursor_values({key}).get(key)
    return int(value) if value is not None else None


def retry_run_as_the_daemon_would(instance: dg.DagsterInstance, failed: dg.DagsterRun) -> dg.DagsterRun:
    """The automatic retry of `failed` that Dagster's daemon makes (dagster._daemon.auto_run_reexecution.retry_run):
    a re-execution in the failed run's group, with its tags (less those Dagster drops on a retry) plus
    `dagster/retry_number` (the group's size, which is how Dagster counts retries against `dagster/max_retries`),
    named on the failed run by `dagster/auto_retry_run_id`, and queued. Built from the failed run's stored job and
    plan snapshots (all its steps; maintenance jobs have one), so no code location is needed. Returns the retry that
    already exists instead when the daemon made one after all."""
    _, group = instance.get_run_group(failed.run_id)
    existing = next((run for run in group if run.parent_run_id == failed.run_id and RETRY_NUMBER_TAG in run.tags),
                    None)
    if existing is not None:
        if AUTO_RETRY_RUN_ID_TAG not in failed.tags:
            instance.add_run_tags(failed.run_id, {AUTO_RETRY_RUN_ID_TAG: existing.run_id})
        return existing
    root_run_id = failed.root_run_id or failed.run_id
    tags = {key: value for key, value in failed.tags.items() if key not in TAGS_TO_MAYBE_OMIT_ON_RETRY}
    tags |= {RETRY_NUMBER_TAG: str(len(group)), PARENT_RUN_ID_TAG: failed.run_id, ROOT_RUN_ID_TAG: root_run_id}
    retry = instance.create_run(
        job_name=failed.job_name, run_id=None, run_config=failed.run_config, status=dg.DagsterRunStatus.NOT_STARTED,
        tags=tags, root_run_id=root_run_id, parent_run_id=failed.run_id, step_keys_to_execute=None,
        execution_plan_snapshot=instance.get_execution_plan_snapshot(failed.execution_plan_snapshot_id),
        job_snapshot=instance.get_job_snapshot(failed.job_snapshot_id), parent_job_snapshot=None,
        asset_selection=failed.asset_selection, asset_check_selection=failed.asset_check_selection,
        resolved_op_selection=failed.resolved_op_selection, op_selection=failed.op_selection,
        remote_job_origin=failed.remote_job_origin, job_code_origin=failed.job_code_origin, asset_graph=None,
    )
    instance.add_run_tags(failed.run_id, {AUTO_RETRY_RUN_ID_TAG: retry.run_id})
    instance.report_engine_event("Retrying the run (Dagster's daemon passed its failure without the retry it "
                                 f"promised; made by the maintenance guard): run {retry.run_id}", failed)
    instance.report_engine_event(f"Launched as an automatic retry of failed run {failed.run_id}", retry)
    instance.submit_run(retry.run_id, workspace=None)
    return instance.get_run_by_id(retry.run_id)
