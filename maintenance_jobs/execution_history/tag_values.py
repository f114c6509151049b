"""Run tag values read back: the one place the execution history, `/executions` and `/metrics` parse a tag.

Whoever launches a run chooses its tags (the Dagster webserver has no authentication, and its GraphQL API takes any
tags), so a tag value is untrusted text, while the views that read it are shared by every run: one run's tag must
never make a page answer 500, stop the history writer or make a gauge unrenderable. Each function here takes the raw
value (or None) and returns one the readers can always store in the registry's columns, serialise and compare:

- an unreadable value (not the shape the writer of that tag uses) is absent (None, or the documented default);
- a number is clamped into its documented bounds (so an absurd retry number still trips the retry alerts);
- a text is cut to the column that stores it.

Numbers are ASCII digits with an optional sign: `int()` alone would also read `" 7"`, `"1_000"` and other scripts'
digits, and raises (or spends CPU) on thousands of digits.
"""

from __future__ import annotations

import datetime as dt
import re

from maintenance_jobs.tags import TRIGGERED_BY
from orchestration_core.tag_numbers import MAX_ITEM_COUNT, MAX_RETRY_NUMBER, clamped_int

__all__ = ["MAX_ITEM_COUNT", "MAX_RETRY_NUMBER", "clamped_int"]  # with the parsers below; the readers import them here

# The numbers' bounds (the retry number's and item counts' are every reader's: orchestration_core/tag_numbers.py).
MIN_PRIORITY, MAX_PRIORITY = 1, 100
# A scheduled minute outside these years is not one the dispatcher wrote (and near year 1 or 9999 it overflows once
# a UTC offset applies); the same bounds as the time ranges the API accepts.
EARLIEST_MINUTE = dt.datetime(1970, 1, 1, tzinfo=dt.UTC)
LATEST_MINUTE = dt.datetime(9000, 1, 1, tzinfo=dt.UTC)
MAX_MINUTE_CHARS = 64  # "2025-06-03T03:05+12:00" is 22; anything much longer is not a minute
# The width of the history's text columns (task_executions: task_name, service, executor, job_name).
MAX_LABEL_CHARS = 255
MAX_TEXT_CHARS = 2_000  # the output and error shown per execution (the op writes at most 500)

_RUN_ID = re.compile(r"[A-Za-z0-9_-]{1,255}")


def retry_number(value: str | None) -> int:
    """`dagster/retry_number`: 0 for a first attempt (or an unreadable tag), at most MAX_RETRY_NUMBER."""
    return clamped_int(value, 0, MAX_RETRY_NUMBER) or 0


def retry_limit(value: str | None) -> int | None:
    """`dagster/max_retries` on a job: None when absent or unreadable (the instance's default applies)."""
    return clamped_int(value, 0, MAX_RETRY_NUMBER)


def priority(value: str | None) -> int | None:
    """`maintenance/priority` (1-100, 1 = most urgent)."""
    return clamped_int(value, MIN_PRIORITY, MAX_PRIORITY)


def item_count(value: str | None) -> int:
    """`racing/items_processed` and `racing/items_failed`: 0 when absent or unreadable."""
    return clamped_int(value, 0, MAX_ITEM_COUNT) or 0


def scheduled_minute(value: str | None) -> dt.datetime | None:
    """`maintenance/scheduled_minute` (a local ISO minute with its offset) as an aware UTC datetime; None when absent,
    unreadable, without an offset (ambiguous) or outside EARLIEST_MINUTE..LATEST_MINUTE."""
    if not isinstance(value, str) or not value or len(value) > MAX_MINUTE_CHARS:
        return None
    try:
        moment = dt.datetime.fromisoformat(value)
        if moment.tzinfo is None:
            return None
        moment = moment.astimezone(dt.UTC)
    except (ValueError, OverflowError):
        return None
    return moment if EARLIEST_MINUTE <= moment < LATEST_MINUTE else None


def label(value: str | None) -> str | None:
    """A name-like tag (task, service, executor) cut to its column."""
    return value[:MAX_LABEL_CHARS] if isinstance(value, str) else None


def text(value: str | None) -> str | None:
    """A message tag (`maintenance/output`, `racing/error`) cut to what an execution shows."""
    return value[:MAX_TEXT_CHARS] if isinstance(value, str) else None


def triggered_by(value: str | None) -> str | None:
    """`maintenance/triggered_by`: scheduler, manual or retry; anything else is absent."""
    return value if value in TRIGGERED_BY else None


def run_id(value: str | None) -> str | None:
    """A run id tag (`dagster/parent_run_id`): Dagster's id alphabet, at most 255 characters, else absent."""
    return value if isinstance(value, str) and _RUN_ID.fullmatch(value) else None
