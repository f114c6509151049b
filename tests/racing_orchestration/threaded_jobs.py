"""Module-level jobs for the threadpool executor tests (execute_job needs reconstructable jobs)."""


import threading
import time

import dagster as dg

from racing_orchestration.threaded_executor import threadpool_executor

# Steps of one run meet here (keyed by run id: execute_job runs the steps in threads of the test's own process).
_RENDEZVOUS: dict[tuple[str, int], threading.Barrier] = {}
_RENDEZVOUS_LOCK = threading.Lock()


def meet(run_id: str, parties: int, timeout: float) -> bool:
    """Wait until `parties` steps of the run are here at once; False when they never all came within `timeout`.

    A barrier makes "these steps overlapped" independent of machine load: a fixed sleep can end before a slow machine
    has started the last step. A timed-out barrier breaks, so every later step of the run passes at once.
    """
    with _RENDEZVOUS_LOCK:
        barrier = _RENDEZVOUS.setdefault((run_id, parties), threading.Barrier(parties))
    try:
        barrier.wait(timeout)
    except threading.BrokenBarrierError:
        return False
    return True


@dg.op(out=dg.DynamicOut(int))
def fan_out(context: dg.OpExecutionContext):
    for i in range(context.op_config["width"]):
        yield dg.DynamicOutput(i, mapping_key=f"item_{i}")


@dg.op(config_schema={
    "fail_on": dg.Field(int, default_value=-1),
    "sleep": dg.Field(float, default_value=0.3),
    "retry_wait": dg.Field(float, default_value=0.1),
    "meet": dg.Field(int, default_value=0, description="wait for this many steps to run at once (0: no wait)"),
    "meet_timeout": dg.Field(float, default_value=20.0),
})
def slow_item(context: dg.OpExecutionContext, i: int) -> dict:
    started = time.monotonic()
    if i == context.op_config["fail_on"] and context.retry_number < 1:
        raise dg.RetryRequested(max_retries=1, seconds_to_wait=context.op_config["retry_wait"])
    met = None
    if context.op_config["meet"]:
        met = meet(context.run_id, context.op_config["meet"], context.op_config["meet_timeout"])
    time.sleep(context.op_config["sleep"])
    return {"i": i, "started": started, "ended": time.monotonic(), "attempt": context.retry_number, "met": met}


@dg.op
def collect(items: list[dict]) -> int:
    return len(items)


@dg.job(executor_def=threadpool_executor)
def threaded_fan_out_job():
    collect(fan_out().map(slow_item).collect())


@dg.op
def explode() -> int:
    raise ValueError("boom in a thread")


@dg.job(executor_def=threadpool_executor)
def threaded_failing_job():
    explode()
