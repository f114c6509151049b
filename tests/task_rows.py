"""Task rows for the registry and control API tests: one valid example_executor task, fields overridable."""

from __future__ import annotations


def task_data(name: str = "nightly", **changes) -> dict:
    """A valid example_executor task with default cron fields (every minute); keyword arguments override fields."""
    data = {
        "task_name": name,
        "service": "scheduler",
        "executor": "example_executor",
        "priority": 50,
        "config": {"message": "hi", "delay_seconds": 0},
    }
    return {**data, **changes}


def task_body(name: str = "nightly", **changes) -> dict:
    """The same task due daily at 04:00, as a client would POST it."""
    return task_data(name, **{"minute": 0, "hour": 4, "description": "Daily task at 4 AM", **changes})
