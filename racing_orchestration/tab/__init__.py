"""The TAB NZ affiliates racing API: typed models, the client resource and the simulated feed.

Names are imported lazily so that `racing sim` and the parsers do not pay for importing Dagster.
"""

from __future__ import annotations

import importlib
from typing import Any

_EXPORTS = {
    "racing_orchestration.tab.client": ("ApiCall", "TabApiError", "TabClient", "TabTransientError"),
    "racing_orchestration.tab.models": (
        "ABANDONED", "CLOSED", "FINAL", "INTERIM", "LIVE", "OPEN", "Dividend", "Event", "EventRace", "Meeting",
        "MeetingRace", "Odds", "Result", "Runner", "TabPayloadError", "parse_event_response",
        "parse_meetings_response", "parse_races_list_response", "status_is",
    ),
    "racing_orchestration.tab.sim_feed": ("SimFeedConfig", "SimFeedServer"),
}
_MODULE_OF = {name: module for module, names in _EXPORTS.items() for name in names}
__all__ = sorted(_MODULE_OF)


def __getattr__(name: str) -> Any:
    if name not in _MODULE_OF:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(_MODULE_OF[name]), name)
