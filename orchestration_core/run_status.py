"""Dagster's run statuses by value, for code that reads run storage without importing Dagster (the control API).

`runs.status` holds a DagsterRunStatus value; these are the same strings (tests/orchestration_core/test_run_status.py
checks them against Dagster's enum, so an upgrade that adds or renames one fails there). Functions that take a status
accept either a DagsterRunStatus or its value (`status_value`).
"""

from __future__ import annotations

from enum import StrEnum


class RunStatus(StrEnum):
    QUEUED = "QUEUED"
    NOT_STARTED = "NOT_STARTED"
    MANAGED = "MANAGED"
    STARTING = "STARTING"
    STARTED = "STARTED"
    SUSPENDED = "SUSPENDED"
    SUCCESS = "SUCCESS"
    FAILURE = "FAILURE"
    CANCELING = "CANCELING"
    CANCELED = "CANCELED"


ENDED = (RunStatus.SUCCESS, RunStatus.FAILURE, RunStatus.CANCELED)
IN_PROGRESS = tuple(status for status in RunStatus if status not in ENDED)


def status_value(status: object) -> str:
    """The value of a DagsterRunStatus (an Enum, not a str), or `status` itself when it is already one."""
    return str(getattr(status, "value", status))


def run_status(status: object) -> RunStatus:
    """A DagsterRunStatus or its value as a RunStatus (ValueError for an unknown value)."""
    return RunStatus(status_value(status))
