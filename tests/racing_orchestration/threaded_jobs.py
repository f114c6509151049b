"""Module-level jobs for the threadpool executor tests (execute_job needs reconstructable jobs)."""


import time

import dagster as dg

from racing_orchestration.threaded_executor import threadpool_executor


@dg.op(out=dg.DynamicOut(int))
def fan_out(context: dg.OpExecutionContext):
    for i in range(context.op_config["width"]):
        yield dg.DynamicOutput(i, mapping_key=f"item_{i}")


@dg.op(config_schema={"fail_on": dg.Field(int, default_value=-1), "sleep": dg.Field(float, default_value=0.3)})
def slow_item(context: dg.OpExecutionContext, i: int) -> dict:
    started = time.monotonic()
    if i == context.op_config["fail_on"] and context.retry_number < 1:
        raise dg.RetryRequested(max_retries=1, seconds_to_wait=0.1)
    time.sleep(context.op_config["sleep"])
    return {"i": i, "started": started, "ended": time.monotonic(), "attempt": context.retry_number}


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
