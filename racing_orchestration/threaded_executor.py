"""A thread-pool executor: the steps of one run execute concurrently in threads of the run worker.

The racing jobs fan out into many small I/O-bound steps (one per TAB API combination). The multiprocess executor
pays a Python interpreter start and a definitions load per step (~1 s of CPU each on our 2-core hosts), which costs
more than the HTTP calls themselves; the in-process executor runs steps one after another. Threads give bounded
concurrency at almost no cost, while every step keeps its own events, retries and output in the UI.

It follows the in-process executor's loop (`inner_plan_execution_iterator`) but hands each step's event sequence to
a worker thread; the orchestrating thread alone touches `ActiveExecution`, so its bookkeeping stays single-threaded.
Steps share the run's resources, which must therefore be thread-safe (httpx clients and SQLAlchemy engines are).
Like the in-process executor it captures the run process's stdout/stderr as the run's compute logs (one capture for
all steps, which the UI shows per run), and it honours `tag_concurrency_limits` on step tags as the multiprocess
executor does. The Dagster step machinery it is built from is private; it comes from orchestration_core/
dagster_internals.py, the one module that imports Dagster's private APIs.
"""

from __future__ import annotations

import os
import queue
import random
import string
import sys
import threading
from collections.abc import Iterator
from contextlib import ExitStack
from dataclasses import dataclass
from typing import Any

import dagster as dg

from orchestration_core.dagster_internals import (
    ExecuteRunWithPlanIterable,
    InstanceConcurrencyContext,
    PlanExecutionContextManager,
    RetryMode,
    dagster_event_sequence_for_step,
    trigger_step_hooks,
)

DEFAULT_MAX_THREADS = 8
_POLL_SECONDS = 0.05


@dataclass(frozen=True)
class _StepFinished:
    step_key: str
    launch: int  # which launch of the step (a retried step is launched again under the same key)
    error: BaseException | None = None


def compute_log_file_key() -> str:
    """A fresh name for the run's compute-log capture, as Dagster's executors draw one (8 lowercase letters), from the
    system's randomness so a step that seeds `random` cannot make two runs' captures collide."""
    rng = random.SystemRandom()
    return "".join(rng.choice(string.ascii_lowercase) for _ in range(8))


def _capture_error_message(when: str) -> str:
    error_type, error, _ = sys.exc_info()
    return f"Exception while {when} compute log capture: {getattr(error_type, '__name__', 'error')}: {error}"


class ThreadPoolExecutor(dg.Executor):
    """Runs up to `max_concurrent` steps of a run at once, each in its own thread."""

    def __init__(
        self,
        retries: RetryMode,
        max_concurrent: int = DEFAULT_MAX_THREADS,
        tag_concurrency_limits: list[dict[str, Any]] | None = None,
    ) -> None:
        self._retries = retries
        self.max_concurrent = max_concurrent
        self.tag_concurrency_limits = tag_concurrency_limits or []

    @property
    def retries(self) -> RetryMode:
        return self._retries

    def execute(self, plan_context, execution_plan) -> Iterator[dg.DagsterEvent]:
        # dagster-postgres opens a new connection for every event (NullPool) so short-lived workers hold none;
        # with many steps writing events from several threads that connect cost dominates. A small pool,
        # the same one the webserver uses, lives only as long as this run worker.
        plan_context.instance.optimize_for_webserver(
            statement_timeout=0, pool_recycle=3600, max_overflow=self.max_concurrent
        )
        plan_context.log.info(f"Executing steps in up to {self.max_concurrent} threads (pid: {os.getpid()})")
        yield from iter(
            ExecuteRunWithPlanIterable(
                execution_plan=plan_context.execution_plan,
                iterator=self._iterate,
                execution_context_manager=PlanExecutionContextManager(
                    job=plan_context.job,
                    retry_mode=plan_context.retry_mode,
                    execution_plan=plan_context.execution_plan,
                    run_config=plan_context.run_config,
                    dagster_run=plan_context.dagster_run,
                    instance=plan_context.instance,
                    raise_on_error=plan_context.raise_on_error,
                    output_capture=plan_context.output_capture,
                ),
            )
        )

    def _iterate(self, job_context, execution_plan, instance_concurrency_context=None) -> Iterator[dg.DagsterEvent]:
        with InstanceConcurrencyContext(job_context.instance, job_context.dagster_run) as concurrency_context:
            with ExitStack() as capture_stack:
                # The whole run process's stdout/stderr, as the in-process executor captures it: threads share the
                # process's file descriptors, so one capture holds every step's output.
                compute_log_manager = job_context.instance.compute_log_manager
                step_keys = [step.key for step in execution_plan.get_steps_to_execute_in_topo_order()]
                log_key = compute_log_manager.build_log_key_for_run(job_context.run_id, compute_log_file_key())
                try:
                    log_context = capture_stack.enter_context(compute_log_manager.capture_logs(log_key))
                    yield dg.DagsterEvent.capture_logs(job_context, step_keys, log_key, log_context)
                except Exception:  # noqa: BLE001 - the run goes on without captured output, as Dagster's executors do
                    job_context.log.error(_capture_error_message("setting up"))
                yield from self._run_steps(job_context, execution_plan, concurrency_context)
                try:
                    capture_stack.close()
                except Exception:  # noqa: BLE001 - the steps ran; only their output's capture failed
                    job_context.log.error(_capture_error_message("cleaning up"))

    def _run_steps(self, job_context, execution_plan, concurrency_context) -> Iterator[dg.DagsterEvent]:
        events: queue.Queue[dg.DagsterEvent | _StepFinished] = queue.Queue()
        step_events: dict[str, list[dg.DagsterEvent]] = {}
        step_contexts = {}
        # The launches whose thread has not yet reported its end. A step's STEP_SUCCESS can be handled before its
        # thread ends, and only the end resolves its dynamic outputs into mapped steps: until then the plan can look
        # complete. A retry without a wait can be launched while the attempt that asked for it is still ending, so a
        # launch is told apart from the step's next one.
        running: set[tuple[str, int]] = set()
        launches: dict[str, int] = {}
        with execution_plan.start(
            retry_mode=job_context.retry_mode,
            max_concurrent=self.max_concurrent,
            tag_concurrency_limits=self.tag_concurrency_limits,
            instance_concurrency_context=concurrency_context,
        ) as active_execution:
            while running or not active_execution.is_complete:
                for step in active_execution.get_steps_to_execute(limit=self.max_concurrent):
                    step_context = job_context.for_step(step, active_execution.get_known_state())
                    step_contexts[step.key] = step_context
                    step_events[step.key] = []
                    launches[step.key] = launches.get(step.key, 0) + 1
                    running.add((step.key, launches[step.key]))
                    threading.Thread(
                        target=_run_step_in_thread,
                        args=(step.key, launches[step.key], step_context, events),
                        name=f"dagster-step-{step.key}",
                        daemon=True,
                    ).start()
                yield from active_execution.concurrency_event_iterator(job_context)

                if not running:
                    active_execution.sleep_til_ready()
                    continue
                try:
                    item = events.get(timeout=max(_POLL_SECONDS, min(active_execution.sleep_interval(), 1.0)))
                except queue.Empty:
                    continue
                while True:
                    if isinstance(item, _StepFinished):
                        running.discard((item.step_key, item.launch))
                    if not isinstance(item, _StepFinished) or item.launch == launches[item.step_key]:
                        yield from self._handle(item, job_context, active_execution, step_contexts, step_events)
                    try:
                        item = events.get_nowait()
                    except queue.Empty:
                        break

    @staticmethod
    def _handle(item, job_context, active_execution, step_contexts, step_events) -> Iterator[dg.DagsterEvent]:
        if isinstance(item, dg.DagsterEvent):
            step_events[item.step_key].append(item)
            yield item
            active_execution.handle_event(item)
            return
        if item.error is not None:
            # A crash outside the step's own error boundary (Dagster's step sequence turns the step's errors into its
            # STEP_FAILURE; with raise_on_error it re-raises them after that): raised here, in the run's thread, as
            # the in-process executor raises it, so Dagster fails the run with the error and its traceback.
            raise item.error
        active_execution.verify_complete(job_context, item.step_key)
        for event in active_execution.plan_events_iterator(job_context):
            step_events[item.step_key].append(event)
            yield event
        yield from trigger_step_hooks(step_contexts.pop(item.step_key), step_events.pop(item.step_key))


def _run_step_in_thread(step_key: str, launch: int, step_context, events: queue.Queue) -> None:
    try:
        for event in dagster_event_sequence_for_step(step_context):
            events.put(event)
    except BaseException as exc:  # noqa: BLE001 - forwarded to the orchestrating thread as a step failure
        events.put(_StepFinished(step_key, launch, exc))
        return
    events.put(_StepFinished(step_key, launch))


# The multiprocess executor's `tag_concurrency_limits` schema, declared with Dagster's public config types: a limit
# applies to steps with the tag `key` (and `value`, when given; `{"applyLimitPerUniqueValue": true}` counts each value
# apart). Dagster's run queue reads the same shape.
TAG_CONCURRENCY_LIMITS_CONFIG = dg.Field(
    dg.Array(dg.Shape({
        "key": str,
        "value": dg.Field(dg.ScalarUnion(scalar_type=str, non_scalar_schema=dg.Shape({"applyLimitPerUniqueValue": bool})),
                          is_required=False),
        "limit": dg.Field(int),
    })),
    is_required=False,
    description="Limits on the steps of a run by their op tags; without a value, across all values of the key.",
)


@dg.executor(
    name="threadpool",
    config_schema={
        "max_concurrent": dg.Field(int, default_value=DEFAULT_MAX_THREADS, description="Steps run at once."),
        "retries": dg.Field(
            dg.Selector({"enabled": {}, "disabled": {}}), default_value={"enabled": {}}, is_required=False
        ),
        # Limits on steps by their op tags, e.g. [{"key": "tab/api", "limit": 2}] (the multiprocess executor's form).
        "tag_concurrency_limits": TAG_CONCURRENCY_LIMITS_CONFIG,
    },
)
def threadpool_executor(init_context: dg.InitExecutorContext) -> ThreadPoolExecutor:
    """Executes the steps of a run concurrently in threads of the run worker (for I/O-bound fan-outs)."""
    config = init_context.executor_config
    max_concurrent = config["max_concurrent"]
    if max_concurrent < 1:
        raise dg.DagsterInvalidConfigError("threadpool executor", [], f"max_concurrent must be >= 1, got {max_concurrent}")
    return ThreadPoolExecutor(
        retries=RetryMode.from_config(config["retries"]),
        max_concurrent=max_concurrent,
        tag_concurrency_limits=config.get("tag_concurrency_limits"),
    )

