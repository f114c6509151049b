"""Every private Dagster API the project uses outside the threadpool executor, in one place.

Dagster's run and event-log tables are read directly where its public API has no equivalent at the speed needed
(the control API's /executions, /stats and /metrics pages; bulk run retention), and the schedule storage's selector
types are used to read schedule and sensor state and their ticks, and the control API pings the code servers over
Dagster's gRPC API. Each name here is checked by
tests/orchestration_core/test_dagster_internals.py, so an upgrade that moves or changes one fails there, loudly, not
somewhere in a page. The only other module reaching into `dagster._` is racing_orchestration/threaded_executor.py.
"""

from __future__ import annotations

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
from dagster._core.storage.tags import AUTO_RETRY_RUN_ID_TAG, RUN_KEY_TAG, WILL_RETRY_TAG
from dagster._grpc.client import DagsterGrpcClient
from dagster._grpc.__generated__ import dagster_api_pb2

__all__ = [
    "AUTO_RETRY_RUN_ID_TAG",
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
    "ping_code_server",
]


def ping_code_server(host: str, port: int, timeout_seconds: int) -> None:
    """One gRPC Ping of a code server (what `dagster api grpc-health-check` asks, with a timeout of our own; the
    public `ping` waits Dagster's default 60 s). Raises on no answer."""
    client = DagsterGrpcClient(port=port, host=host)
    client._query("Ping", dagster_api_pb2.PingRequest, timeout=timeout_seconds, echo="control-api")
