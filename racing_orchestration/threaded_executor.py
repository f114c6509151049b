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
executor does. This module and orchestration_core/dagster_internals.py are the only users of Dagster's private APIs.
"""

from __future__ import annotations

import os
import queue
import sys
import threading
from collections.abc import Iterator
from contextlib import ExitStack
from dataclasses import dataclass
from typing import Any

import dagster as dg
from dagster._core.events import DagsterEvent, EngineEventData
from dagster._core.execution.api import ExecuteRunWithPlanIterable
from dagster._core.execution.compute_logs import create_compute_log_file_key
from dagster._core.execution.context.system import PlanExecutionContext, PlanOrchestrationContext
from dagster._core.execution.context_creation_job import PlanExecutionContextManager
from dagster._core.execution.plan.execute_plan import (
    _handle_compute_log_setup_error,
    _handle_compute_log_teardown_error,
    _trigger_hook,
    dagster_event_sequence_for_step,
)
from dagster._core.execution.plan.instance_concurrency_context import InstanceConcurrencyContext
from dagster._core.execution.plan.objects import StepFailureData
from dagster._core.execution.plan.plan import ExecutionPlan
from dagster._core.execution.retries import RetryMode
from dagster._core.execution.tags import get_tag_concurrency_limits_config
from dagster._core.executor.base import Executor
from dagster._utils.error import serializable_error_info_from_exc_info

DEFAULT_MAX_THREADS = 8
_POLL_SECONDS = 0.05


@dataclass(frozen=True)
class _StepFinished:
    step_key: str
    launch: int  # which launch of the step (a retried step is launched again under the same key)
    error: BaseException | None = None


class ThreadPoolExecutor(Executor):
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

    def execute(self, plan_context: PlanOrchestrationContext, execution_plan: ExecutionPlan) -> Iterator[DagsterEvent]:
        # dagster-postgres opens a new connection for every event (NullPool) so short-lived workers hold none;
        # with many steps writing events from several threads that connect cost dominates. A small pool,
        # the same one the webserver uses, lives only as long as this run worker.
        plan_context.instance.optimize_for_webserver(
            statement_timeout=0, pool_recycle=3600, max_overflow=self.max_concurrent
        )
        yield DagsterEvent.engine_event(
            plan_context,
            f"Executing steps in up to {self.max_concurrent} threads (pid: {os.getpid()})",
            event_specific_data=EngineEventData.in_process(os.getpid(), execution_plan.step_keys_to_execute),
        )
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

    def _iterate(
        self,
        job_context: PlanExecutionContext,
        execution_plan: ExecutionPlan,
        instance_concurrency_context: InstanceConcurrencyContext | None = None,
    ) -> Iterator[DagsterEvent]:
        with InstanceConcurrencyContext(job_context.instance, job_context.dagster_run) as concurrency_context:
            with ExitStack() as capture_stack:
                # The whole run process's stdout/stderr, as the in-process executor captures it: threads share the
                # process's file descriptors, so one capture holds every step's output.
                compute_log_manager = job_context.instance.compute_log_manager
                step_keys = [step.key for step in execution_plan.get_steps_to_execute_in_topo_order()]
                log_key = compute_log_manager.build_log_key_for_run(job_context.run_id, create_compute_log_file_key())
                try:
                    log_context = capture_stack.enter_context(compute_log_manager.capture_logs(log_key))
                    yield DagsterEvent.capture_logs(job_context, step_keys, log_key, log_context)
                except Exception:
                    yield from _handle_compute_log_setup_error(job_context, sys.exc_info())
                yield from self._run_steps(job_context, execution_plan, concurrency_context)
                try:
                    capture_stack.close()
                except Exception:
                    yield from _handle_compute_log_teardown_error(job_context, sys.exc_info())

    def _run_steps(
        self,
        job_context: PlanExecutionContext,
        execution_plan: ExecutionPlan,
        concurrency_context: InstanceConcurrencyContext,
    ) -> Iterator[DagsterEvent]:
        events: queue.Queue[DagsterEvent | _StepFinished] = queue.Queue()
        step_events: dict[str, list[DagsterEvent]] = {}
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
    def _handle(item, job_context, active_execution, step_contexts, step_events) -> Iterator[DagsterEvent]:
        if isinstance(item, DagsterEvent):
            step_events[item.step_key].append(item)
            yield item
            active_execution.handle_event(item)
            return
        if item.error is not None:
            # A crash outside the step's own error boundary: report it and fail the step, not the whole run.
            error = serializable_error_info_from_exc_info(
                (type(item.error), item.error, item.error.__traceback__)
            )
            yield DagsterEvent.engine_event(
                job_context,
                f"Step {item.step_key} crashed in its thread: {error.message}",
                event_specific_data=EngineEventData(error=error),
                step_handle=step_contexts[item.step_key].step.handle,
            )
            failure = DagsterEvent.step_failure_event(
                step_context=step_contexts[item.step_key],
                step_failure_data=StepFailureData(error=error, user_failure_data=None),
            )
            yield failure
            active_execution.handle_event(failure)
        active_execution.verify_complete(job_context, item.step_key)
        for event in active_execution.plan_events_iterator(job_context):
            step_events[item.step_key].append(event)
            yield event
        yield from _trigger_hook(step_contexts.pop(item.step_key), step_events.pop(item.step_key))


def _run_step_in_thread(step_key: str, launch: int, step_context, events: queue.Queue) -> None:
    try:
        for event in dagster_event_sequence_for_step(step_context):
            events.put(event)
    except BaseException as exc:  # noqa: BLE001 - forwarded to the orchestrating thread as a step failure
        events.put(_StepFinished(step_key, launch, exc))
        return
    events.put(_StepFinished(step_key, launch))


@dg.executor(
    name="threadpool",
    config_schema={
        "max_concurrent": dg.Field(int, default_value=DEFAULT_MAX_THREADS, description="Steps run at once."),
        "retries": dg.Field(
            dg.Selector({"enabled": {}, "disabled": {}}), default_value={"enabled": {}}, is_required=False
        ),
        # Limits on steps by their op tags, e.g. [{"key": "tab/api", "limit": 2}] (the multiprocess executor's form).
        "tag_concurrency_limits": get_tag_concurrency_limits_config(),
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

