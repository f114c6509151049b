"""The host's local timezone for one block of a test: code that reads a naive time as local, or converts to the
host's zone, gives a different instant off UTC, which a test on a UTC host never sees (the suite passes in any
timezone, DEVGUIDE.md)."""

from __future__ import annotations

import os
import time
from collections.abc import Iterator
from contextlib import contextmanager


@contextmanager
def host_timezone(name: str) -> Iterator[None]:
    before = os.environ.get("TZ")
    os.environ["TZ"] = name
    time.tzset()
    try:
        yield
    finally:
        if before is None:
            os.environ.pop("TZ", None)
        else:
            os.environ["TZ"] = before
        time.tzset()
