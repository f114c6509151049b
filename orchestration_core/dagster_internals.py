"""Every private Dagster API the project's code uses, in one place: the six names the threadpool executor is built from.

The morning scrape runs its ~60 I/O-bound steps in threads of one run worker (racing_orchestration/
threaded_executor.py). Dagster's public executors were measured against it (bench/morning_scrape.py, BENCHMARKS.md
"Morning scrape"): `multiprocess_executor` (forkserver, preloaded modules) costs 12x the wall time and 17x the CPU,
`in_process_executor` 5x the wall time, and concurrency inside one op loses each combination's own step (its retry,
its place in the UI, re-execution of the failed ones). So the executor stays, and it needs Dagster's step machinery,
which has no public form. Everything else the project reads of Dagster goes through public APIs: its tables are
declared in orchestration_core/dagster_schema.py, its run tag keys in orchestration_core/dagster_tags.py, the
code servers are asked the standard gRPC health check (orchestration_core/code_server_probe.py), and the daemon's
storage is configured through `optimize_for_webserver` (orchestration_core/pooled_storage.py).

Nothing here replaces or wraps an attribute of a Dagster class or object. Each name is checked by
tests/orchestration_core/test_dagster_internals.py (its signature, the way the executor calls it), so an upgrade that
moves or reshapes one fails there, naming it, instead of inside a morning scrape.
"""

from __future__ import annotations

# The run-level iterator every Dagster executor hands its step loop to: it opens the run's execution context (resources,
# the run's loggers) and turns a crash into RUN_FAILURE. Public route tried: `dg.Executor` subclasses get a
# PlanOrchestrationContext only, with no public way to open a step's execution context.
from dagster._core.execution.api import ExecuteRunWithPlanIterable

# Builds the PlanExecutionContext that ExecuteRunWithPlanIterable opens (the in-process executor's own). No public form.
from dagster._core.execution.context_creation_job import PlanExecutionContextManager

# One step's whole event sequence (inputs, the op, outputs, retries, its error boundary) and its hooks afterwards: what
# the in-process executor runs per step. Public route tried: `dg.execute_job` runs a whole job, not one step of it.
from dagster._core.execution.plan.execute_plan import _trigger_hook as trigger_step_hooks
from dagster._core.execution.plan.execute_plan import dagster_event_sequence_for_step

# Holds and frees the run's global op-concurrency slots (pools) while steps run. No public form.
from dagster._core.execution.plan.instance_concurrency_context import InstanceConcurrencyContext

# The retry policy an executor reports (`Executor.retries` is typed with it; the public executors build it from the same
# `retries` config). No public form.
from dagster._core.execution.retries import RetryMode

__all__ = [
    "ExecuteRunWithPlanIterable",
    "InstanceConcurrencyContext",
    "PlanExecutionContextManager",
    "RetryMode",
    "dagster_event_sequence_for_step",
    "trigger_step_hooks",
]
