"""Settings that must be known when definitions load (schedule timezones); everything else is resolved at run time."""

from __future__ import annotations

import os

DEFAULT_RACING_TIMEZONE = "Pacific/Auckland"


def racing_timezone() -> str:
    """IANA timezone of the racing day and its schedules (`RACING_TIMEZONE`)."""
    return os.environ.get("RACING_TIMEZONE", DEFAULT_RACING_TIMEZONE)
