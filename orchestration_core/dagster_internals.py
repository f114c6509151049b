"""Every private Dagster API the project uses outside the threadpool executor, in one place.

Dagster's run and event-log tables are read directly where its public API has no equivalent at the speed needed
(the control API's /executions, /stats and /metrics pages; bulk run retention), and the schedule storage's selector
types are used to read schedule and sensor state and their ticks. Dagster's run tag keys are the project's own
strings (orchestration_core/dagster_tags.py), the maintenance guard's run retries use only public instance methods
(orchestration_core/run_retries.py), and the control API asks the code servers the standard gRPC health check
(orchestration_core/code_server_probe.py). Nothing here replaces or wraps an attribute of a Dagster class or object:
how the code servers behave is configured where they start (`CODE_SERVER_HEARTBEAT_TTL_SECONDS`,
orchestration_core/settings.py). Each name here is checked by tests/orchestration_core/test_dagster_internals.py, so
an upgrade that moves or changes one fails there, loudly, not somewhere in a page. The only other module reaching into `dagster._` is
racing_orchestration/threaded_executor.py.
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

__all__ = [
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
]

