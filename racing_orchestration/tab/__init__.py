"""The TAB NZ affiliates racing API: typed models, the client resource and the simulated feed."""

from racing_orchestration.tab.client import ApiCall, TabApiError, TabClient, TabTransientError
from racing_orchestration.tab.models import (
    ABANDONED,
    CLOSED,
    FINAL,
    INTERIM,
    LIVE,
    OPEN,
    Dividend,
    Event,
    EventRace,
    Meeting,
    MeetingRace,
    Odds,
    Result,
    Runner,
    TabPayloadError,
    parse_event_response,
    parse_meetings_response,
    parse_races_list_response,
    status_is,
)

__all__ = [
    "ABANDONED", "CLOSED", "FINAL", "INTERIM", "LIVE", "OPEN", "ApiCall", "Dividend", "Event", "EventRace", "Meeting",
    "MeetingRace", "Odds", "Result", "Runner", "TabApiError", "TabClient", "TabPayloadError", "TabTransientError",
    "parse_event_response", "parse_meetings_response", "parse_races_list_response", "status_is",
]
