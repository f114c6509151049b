"""example_executor: log a message, wait, return a message (the scheduler's smoke test)."""

from __future__ import annotations

import logging
import time

from maintenance_jobs.executor_configs import ExampleConfig


def run_example(config: ExampleConfig, log: logging.Logger | logging.LoggerAdapter) -> str:
    log.info(config.message)
    if config.delay_seconds:
        time.sleep(config.delay_seconds)
    return f"Example task completed: {config.message} (waited {config.delay_seconds:g}s)"
