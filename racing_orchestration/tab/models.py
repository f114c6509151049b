"""Typed models of the TAB affiliates API and tolerant parsers of its `{header, params, data}` envelope."""

from __future__ import annotations

import datetime as dt
from typing import Annotated, Any, TypeVar

from pydantic import AfterValidator, AliasChoices, BaseModel, ConfigDict, Field, ValidationError, field_validator

M = TypeVar("M", bound=BaseModel)

OPEN, CLOSED, LIVE, INTERIM, FINAL, ABANDONED = "Open", "Closed", "Live", "Interim", "Final", "Abandoned"


def status_is(status: str | None, *names: str) -> bool:
    """Case-insensitive status match: sources differ in case, and unknown statuses are kept as given."""
    folded = (status or "").strip().casefold()
    return any(folded == name.casefold() for name in names)


class TabPayloadError(ValueError):
    """A response that is not the documented envelope or whose data cannot be read."""

    def __init__(self, endpoint: str, problem: str) -> None:
        super().__init__(f"TAB {endpoint} response: {problem}")
        self.endpoint = endpoint
        self.problem = problem


def _to_utc(value: dt.datetime) -> dt.datetime:
    # Naive times from the API are UTC; normalise every zone to `datetime.timezone.utc`.
    return value.replace(tzinfo=dt.UTC) if value.tzinfo is None else value.astimezone(dt.UTC)


UtcDatetime = Annotated[dt.datetime, AfterValidator(_to_utc)]


def _blank_to_none(value: Any) -> Any:
    # The API sends "" for unknown conditions and 0 for timestamps that have not happened.
    return None if value in ("", 0) else value


class _TabModel(BaseModel):
    model_config = ConfigDict(frozen=True, extra="ignore", populate_by_name=True)


class MeetingRace(_TabModel):
    race_id: str = Field(validation_alias=AliasChoices("id", "race_id"))
    race_number: int
    name: str
    start_time: UtcDatetime
    status: str
    distance: int | None = None
    track_condition: str | None = None
    weather: str | None = None
    country: str | None = None

    _blank = field_validator("distance", "track_condition", "weather", "country", mode="before")(_blank_to_none)


class Meeting(_TabModel):
    meeting_id: str = Field(validation_alias=AliasChoices("meeting", "meeting_id"))
    name: str
    date: dt.date
    category: str
    category_name: str | None = None
    country: str
    state: str | None = None
    track_condition: str | None = None
    races: list[MeetingRace] = []

    _blank = field_validator("category_name", "state", "track_condition", mode="before")(_blank_to_none)

    @field_validator("date", mode="before")
    @classmethod
    def _local_date(cls, value: Any) -> Any:
        # The meeting-local date comes as "2025-07-17T00:00:00Z"; the time part carries nothing.
        return value[:10] if isinstance(value, str) else value

    @field_validator("races", mode="before")
    @classmethod
    def _null_races(cls, value: Any) -> Any:
        return [] if value is None else value


class Odds(_TabModel):
    fixed_win: float | None = None
    fixed_place: float | None = None
    pool_win: float | None = None
    pool_place: float | None = None


class Runner(_TabModel):
    entrant_id: str
    runner_number: int
    name: str
    barrier: int | None = None
    jockey: str | None = None
    trainer_name: str | None = None
    is_scratched: bool = False
    is_late_scratched: bool = False
    scratch_time: UtcDatetime | None = None
    odds: Odds = Odds()

    _blank = field_validator("barrier", "jockey", "trainer_name", "scratch_time", mode="before")(_blank_to_none)

    @field_validator("odds", mode="before")
    @classmethod
    def _null_odds(cls, value: Any) -> Any:
        return {} if value is None else value


class EventRace(_TabModel):
    event_id: str
    meeting_id: str
    meeting_name: str | None = None
    name: str = Field(validation_alias=AliasChoices("description", "name"))
    race_number: int
    category: str | None = Field(default=None, validation_alias=AliasChoices("type", "category"))
    status: str
    advertised_start: UtcDatetime
    actual_start: UtcDatetime | None = None
    distance: int | None = None
    track_condition: str | None = None
    weather: str | None = None

    _blank = field_validator(
        "meeting_name", "category", "actual_start", "distance", "track_condition", "weather", mode="before"
    )(_blank_to_none)


class Result(_TabModel):
    position: int
    runner_number: int
    name: str | None = None
    entrant_id: str | None = None
    margin_length: float | None = None


class Dividend(_TabModel):
    dividend_id: str = Field(validation_alias=AliasChoices("id", "dividend_id"))
    product_name: str
    status: str
    dividend: float | None = None
    pool_size: float | None = None
    positions: list[tuple[int, int]] = []
    description: str | None = None
    tote: str | None = None

    @field_validator("positions", mode="before")
    @classmethod
    def _positions(cls, value: Any) -> Any:
        if value is None:
            return []
        return [(p["runner_number"], p["position"]) if isinstance(p, dict) else p for p in value]


class Event(_TabModel):
    race: EventRace
    runners: list[Runner] = []
    results: list[Result] = []
    dividends: list[Dividend] = []

    @field_validator("runners", "results", "dividends", mode="before")
    @classmethod
    def _null_blocks(cls, value: Any) -> Any:
        # Go encodes empty slices as null, and results/dividends are omitted before the race is run.
        return [] if value is None else value

    @property
    def is_final(self) -> bool:
        return status_is(self.race.status, FINAL)

    @property
    def is_interim(self) -> bool:
        return status_is(self.race.status, INTERIM)

    @property
    def is_abandoned(self) -> bool:
        return status_is(self.race.status, ABANDONED)

    def final_dividends(self) -> list[Dividend]:
        """Rows confirmed Final; a Final race still carries its earlier Interim rows beside them."""
        return [d for d in self.dividends if status_is(d.status, FINAL)]


class ListRace(_TabModel):
    """One race of the `/list` endpoint (a flat, token-paged race list)."""

    race_id: str = Field(validation_alias=AliasChoices("id", "race_id"))
    name: str
    race_number: int | None = Field(default=None, validation_alias=AliasChoices("number", "race_number"))
    meeting_id: str
    advertised_start: UtcDatetime
    actual_start: UtcDatetime | None = None

    _blank = field_validator("actual_start", mode="before")(_blank_to_none)


class RacesPage(_TabModel):
    races: list[ListRace]
    next_page_token: str | None = None

    _blank = field_validator("next_page_token", mode="before")(_blank_to_none)


def envelope_data(payload: Any, endpoint: str) -> dict[str, Any]:
    """The `data` object of a `{header, params, data}` envelope, or a TabPayloadError saying what is wrong."""
    if not isinstance(payload, dict):
        got = type(payload).__name__
        raise TabPayloadError(endpoint, f"expected a JSON object {{header, params, data}}, got {got}")
    header = payload.get("header")
    if isinstance(header, dict) and header.get("error"):
        raise TabPayloadError(endpoint, f"API error {header.get('error_code') or ''} {header['error']!r}".strip())
    missing = [key for key in ("header", "data") if not isinstance(payload.get(key), dict)]
    if missing:
        raise TabPayloadError(endpoint, f"not the {{header, params, data}} envelope: no {' or '.join(missing)} object")
    return payload["data"]


def _list_field(data: dict[str, Any], key: str, endpoint: str) -> list[Any]:
    if key not in data:
        raise TabPayloadError(endpoint, f"data.{key} is missing")
    value = data[key]
    if value is None:
        return []
    if not isinstance(value, list):
        raise TabPayloadError(endpoint, f"data.{key} is not a list (got {type(value).__name__})")
    return value


def _validate(model: type[M], raw: Any, endpoint: str, where: str) -> M:
    try:
        return model.model_validate(raw)
    except ValidationError as exc:
        first = exc.errors()[0]
        loc = "".join(f"[{part}]" if isinstance(part, int) else f".{part}" for part in first["loc"])
        more = f" (and {exc.error_count() - 1} more problems)" if exc.error_count() > 1 else ""
        raise TabPayloadError(endpoint, f"{where}{loc}: {first['msg']}{more}") from exc


def parse_meetings_response(payload: Any, endpoint: str = "/meetings") -> list[Meeting]:
    """Meetings of a `/meetings` or `/meetings/{id}` response (`data.meetings[]`)."""
    meetings = _list_field(envelope_data(payload, endpoint), "meetings", endpoint)
    return [_validate(Meeting, raw, endpoint, f"data.meetings[{i}]") for i, raw in enumerate(meetings)]


def parse_event_response(payload: Any, endpoint: str = "/events/{id}") -> Event:
    """One race with runners, results and dividends from an `/events/{id}` response."""
    data = envelope_data(payload, endpoint)
    if not isinstance(data.get("race"), dict):
        raise TabPayloadError(endpoint, "data.race is missing or not an object")
    return _validate(Event, data, endpoint, "data")


def parse_races_list_response(payload: Any, endpoint: str = "/list") -> RacesPage:
    """A page of the `/list` races endpoint (`data.races[]`, `data.next_page_token`)."""
    data = envelope_data(payload, endpoint)
    _list_field(data, "races", endpoint)
    return _validate(RacesPage, data, endpoint, "data")
