"""Typed models of the TAB affiliates API and tolerant parsers of its `{header, params, data}` envelope.

Whatever TAB sends stays data: every value a model accepts can be stored in the race database. Strings carry no NUL
and no lone surrogate (Postgres text holds neither), integers fit the int4 columns they go to (`race_db/schema.py`),
an event lists each result runner once and every dividend has an id. A value that breaks these is refused here with
the field named, as any malformed payload is, never by the database halfway through a batch.
"""

from __future__ import annotations

import datetime as dt
import re
from typing import Annotated, Any, NamedTuple, TypeVar

from pydantic import AfterValidator, AliasChoices, BaseModel, ConfigDict, Field, ValidationError, field_validator

from racing_orchestration.tab.showable import showable

M = TypeVar("M", bound=BaseModel)

OPEN, CLOSED, LIVE, INTERIM, FINAL, ABANDONED = "Open", "Closed", "Live", "Interim", "Final", "Abandoned"


def status_is(status: str | None, *names: str) -> bool:
    """Case-insensitive status match: sources differ in case, and unknown statuses are kept as given."""
    folded = (status or "").strip().casefold()
    return any(folded == name.casefold() for name in names)


class TabPayloadError(ValueError):
    """A response that is not the documented envelope or whose data cannot be read."""

    def __init__(self, endpoint: str, problem: str) -> None:
        # Problems quote the response (values, the start of a body): shown escaped, never raw (showable.py).
        problem = showable(problem, 1000)
        super().__init__(showable(f"TAB {endpoint} response: {problem}", 1100))
        self.endpoint = endpoint
        self.problem = problem


def _to_utc(value: dt.datetime) -> dt.datetime:
    # Naive times from the API are UTC; normalise every zone to `datetime.timezone.utc`.
    return value.replace(tzinfo=dt.UTC) if value.tzinfo is None else value.astimezone(dt.UTC)


UtcDatetime = Annotated[dt.datetime, AfterValidator(_to_utc)]

# The race database's integer columns are int4 (`sa.Integer` in race_db/schema.py).
INT4_MIN, INT4_MAX = -(2**31), 2**31 - 1
_NOT_UTF8 = re.compile("[\ud800-\udfff]")


def _storable_text(value: str) -> str:
    if "\x00" in value:
        raise ValueError("contains a NUL character, which Postgres text cannot store")
    if _NOT_UTF8.search(value):
        raise ValueError("contains a lone surrogate (not UTF-8), which Postgres text cannot store")
    return value


def _int4(value: int) -> int:
    if not INT4_MIN <= value <= INT4_MAX:
        raise ValueError(f"out of the range of its Postgres integer column ({INT4_MIN} to {INT4_MAX})")
    return value


Text = Annotated[str, AfterValidator(_storable_text)]
Int4 = Annotated[int, AfterValidator(_int4)]


def _blank_to_none(value: Any) -> Any:
    # The API sends "" for unknown conditions and 0 for timestamps that have not happened.
    return None if value in ("", 0) else value


class _TabModel(BaseModel):
    model_config = ConfigDict(frozen=True, extra="ignore", populate_by_name=True)


class MeetingRace(_TabModel):
    race_id: Text = Field(validation_alias=AliasChoices("id", "race_id"))
    race_number: Int4
    name: Text
    start_time: UtcDatetime
    status: Text
    distance: Int4 | None = None
    track_condition: Text | None = None
    weather: Text | None = None
    country: Text | None = None

    _blank = field_validator("distance", "track_condition", "weather", "country", mode="before")(_blank_to_none)


class Meeting(_TabModel):
    meeting_id: Text = Field(validation_alias=AliasChoices("meeting", "meeting_id"))
    name: Text
    date: dt.date
    category: Text
    category_name: Text | None = None
    country: Text
    state: Text | None = None
    track_condition: Text | None = None
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
    entrant_id: Text
    runner_number: Int4
    name: Text
    barrier: Int4 | None = None
    jockey: Text | None = None
    trainer_name: Text | None = None
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
    event_id: Text
    meeting_id: Text
    meeting_name: Text | None = None
    name: Text = Field(validation_alias=AliasChoices("description", "name"))
    race_number: Int4
    category: Text | None = Field(default=None, validation_alias=AliasChoices("type", "category"))
    status: Text
    advertised_start: UtcDatetime
    actual_start: UtcDatetime | None = None
    distance: Int4 | None = None
    track_condition: Text | None = None
    weather: Text | None = None

    _blank = field_validator(
        "meeting_name", "category", "actual_start", "distance", "track_condition", "weather", mode="before"
    )(_blank_to_none)


class Result(_TabModel):
    position: Int4
    runner_number: Int4
    name: Text | None = None
    entrant_id: Text | None = None
    margin_length: float | None = None


class Dividend(_TabModel):
    dividend_id: Text = Field(validation_alias=AliasChoices("id", "dividend_id"))
    product_name: Text
    status: Text
    dividend: float | None = None
    pool_size: float | None = None
    positions: list[tuple[Int4, Int4]] = []
    description: Text | None = None
    tote: Text | None = None

    @field_validator("positions", mode="before")
    @classmethod
    def _positions(cls, value: Any) -> Any:
        if value is None:
            return []
        return [(p["runner_number"], p["position"]) if isinstance(p, dict) else p for p in value]

    @field_validator("dividend_id")
    @classmethod
    def _keyed(cls, value: str) -> str:
        # The id is the row's key in `dividends`: a blank one cannot tell Interim and Final rows apart.
        if not value.strip():
            raise ValueError("dividend id is blank")
        return value


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

    @field_validator("results")
    @classmethod
    def _one_result_per_runner(cls, value: list[Result]) -> list[Result]:
        # `results` is keyed by (race, runner number): a runner placed twice has no single place to store.
        numbers = [r.runner_number for r in value]
        if duplicated := sorted({n for n in numbers if numbers.count(n) > 1}):
            raise ValueError(f"runner(s) {duplicated} listed more than once")
        return value

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

    race_id: Text = Field(validation_alias=AliasChoices("id", "race_id"))
    name: Text
    race_number: Int4 | None = Field(default=None, validation_alias=AliasChoices("number", "race_number"))
    meeting_id: Text
    advertised_start: UtcDatetime
    actual_start: UtcDatetime | None = None

    _blank = field_validator("actual_start", mode="before")(_blank_to_none)


class RacesPage(_TabModel):
    races: list[ListRace]
    next_page_token: Text | None = None

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


class MeetingsPage(NamedTuple):
    """A `/meetings` response read meeting by meeting: what was read, and why each refused meeting or race was."""

    meetings: list[Meeting]
    refused: tuple[str, ...]  # one reason per refused meeting or race ("data.meetings[3].name: ...")
    listed: int  # meetings in the response, read or refused (paging goes by it)


def read_meetings(payload: Any, endpoint: str = "/meetings") -> MeetingsPage:
    """Meetings of a `/meetings` or `/meetings/{id}` response, each meeting and each race on its own: a bad race is
    left out of its meeting, a bad meeting out of the page, each with its reason, and the rest is read. A page whose
    every meeting is refused is a TabPayloadError (nothing to store, and the caller's retries apply)."""
    raws = _list_field(envelope_data(payload, endpoint), "meetings", endpoint)
    meetings: list[Meeting] = []
    refused: list[str] = []
    for i, raw in enumerate(raws):
        where = f"data.meetings[{i}]"
        if isinstance(raw, dict) and isinstance(raw.get("races"), list):
            races = []
            for j, race in enumerate(raw["races"]):
                try:
                    races.append(_validate(MeetingRace, race, endpoint, f"{where}.races[{j}]"))
                except TabPayloadError as exc:
                    refused.append(exc.problem)
            raw = {**raw, "races": races}
        try:
            meetings.append(_validate(Meeting, raw, endpoint, where))
        except TabPayloadError as exc:
            refused.append(exc.problem)
    if raws and not meetings:
        more = f" (and {len(refused) - 1} more refusals)" if len(refused) > 1 else ""
        raise TabPayloadError(endpoint, f"every meeting was refused: {refused[0]}{more}")
    return MeetingsPage(meetings, tuple(refused), len(raws))


def parse_meetings_response(payload: Any, endpoint: str = "/meetings") -> list[Meeting]:
    """Meetings of a `/meetings` or `/meetings/{id}` response (`data.meetings[]`); any refused meeting or race is a
    TabPayloadError (the client reads pages with `read_meetings`, which keeps the others)."""
    page = read_meetings(payload, endpoint)
    if page.refused:
        more = f" (and {len(page.refused) - 1} more refusals)" if len(page.refused) > 1 else ""
        raise TabPayloadError(endpoint, f"{page.refused[0]}{more}")
    return page.meetings


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
