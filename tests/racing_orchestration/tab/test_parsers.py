"""Parsers on every real TAB sample, plus tolerant and malformed payloads (no network, no Postgres)."""

from __future__ import annotations

import copy
import datetime as dt
import json
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from racing_orchestration.tab.models import (
    ABANDONED,
    FINAL,
    LIVE,
    TabPayloadError,
    parse_event_response,
    parse_meetings_response,
    parse_races_list_response,
    status_is,
)

pytestmark = pytest.mark.unit

MEETINGS = "nz_meetings_list_2025-07-17.json"
EVENT = "nz_event_final_results_dividends_awapuni_r1_2025-07-17.json"
RACES = "nz_races_list_page1_2025-07-17.json"


def _load(samples: Path, name: str) -> Any:
    return json.loads((samples / name).read_text())


@pytest.fixture(scope="module")
def meetings_payload(tab_samples_dir: Path) -> dict[str, Any]:
    return _load(tab_samples_dir, MEETINGS)


@pytest.fixture(scope="module")
def event_payload(tab_samples_dir: Path) -> dict[str, Any]:
    return _load(tab_samples_dir, EVENT)


def test_meetings_sample_counts_match_readme(meetings_payload: dict[str, Any]) -> None:
    meetings = parse_meetings_response(meetings_payload)
    races = [race for meeting in meetings for race in meeting.races]
    assert len(meetings) == 76
    assert len(races) == 748
    assert Counter(r.status for r in races) == {"Final": 530, "Open": 196, "Abandoned": 17, "Interim": 3, "Closed": 2}
    assert len({r.race_id for r in races}) == 748


def test_meetings_sample_fields(meetings_payload: dict[str, Any]) -> None:
    first = parse_meetings_response(meetings_payload)[0]
    assert first.meeting_id == "a24fce8f-e823-4c57-ad3f-aea7b28925bc"
    assert (first.name, first.date, first.category, first.country) == ("Elazig", dt.date(2025, 7, 17), "T", "TUR")
    assert first.track_condition is None  # "" in the payload means unknown
    race = first.races[0]
    assert race.race_id == "d24d7148-cecc-4dab-845b-b886ab19cd9a"
    # A meeting dated the 17th (local) whose first race is on the 16th in UTC.
    assert race.start_time == dt.datetime(2025, 7, 16, 14, 15, tzinfo=dt.UTC)
    assert race.start_time.tzinfo is dt.UTC
    assert (race.race_number, race.distance, race.status) == (1, 2000, "Final")


def test_meetings_sample_categories_and_countries(meetings_payload: dict[str, Any]) -> None:
    meetings = parse_meetings_response(meetings_payload)
    by_combo = Counter((m.category, m.country) for m in meetings)
    assert by_combo[("G", "AUS")] == 14
    assert by_combo[("T", "NZ")] == 1
    assert {m.category for m in meetings} == {"T", "H", "G"}


def test_event_sample_is_final_with_runners_results_and_dividends(event_payload: dict[str, Any]) -> None:
    event = parse_event_response(event_payload)
    race = event.race
    assert race.event_id == "0f57e087-00d9-4c61-9549-835abe2ae2ed"
    assert (race.meeting_name, race.name, race.race_number, race.category) == (
        "Awapuni Synthetic", "PRYDA HANDICAP 1700", 1, "T")
    assert race.advertised_start == dt.datetime(2025, 7, 17, 0, 50, tzinfo=dt.UTC)
    assert race.actual_start == dt.datetime(2025, 7, 17, 0, 52, 46, tzinfo=dt.UTC)
    assert event.is_final and not event.is_interim and not event.is_abandoned
    assert len(event.runners) == 8
    tickford = event.runners[0]
    assert (tickford.runner_number, tickford.name, tickford.barrier, tickford.jockey) == (
        1, "Tickford", 7, "Kate Hercock")
    assert tickford.scratch_time is None  # 0 means never scratched
    assert (tickford.odds.fixed_win, tickford.odds.fixed_place, tickford.odds.pool_win) == (5.0, 1.8, 4.4)
    assert [(r.position, r.runner_number) for r in event.results[:3]] == [(1, 2), (2, 4), (3, 7)]
    assert len(event.results) == 8
    statuses = Counter(d.status for d in event.dividends)
    assert statuses == {"Interim": 7, "Final": 7}
    win_final = [d for d in event.final_dividends() if d.product_name == "Pool Win"]
    assert len(win_final) == 1 and win_final[0].positions == [(2, 1)]
    trifecta = next(d for d in event.dividends if d.product_name == "Pool Trifecta" and d.status == "Interim")
    assert (trifecta.dividend, trifecta.description, trifecta.positions) == (396.6, "2:4:7", [(2, 1), (4, 2), (7, 3)])


def test_races_list_sample(tab_samples_dir: Path) -> None:
    page = parse_races_list_response(_load(tab_samples_dir, RACES))
    assert len(page.races) == 100
    assert page.next_page_token == "eyJwYWdlX251bWJlciI6MiwicGFnZV9yZXF1ZXN0X2hhc2giOiIyemduczN4NHVtcWF5In0"
    first = page.races[0]
    assert (first.race_id, first.name, first.race_number) == (
        "ad4131bd-d118-4e11-82a8-d431a2d883b2", "GREYHOUNDS NORTH DISTANCE", 1)
    assert first.actual_start == dt.datetime(2025, 7, 17, 0, 0, 22, tzinfo=dt.UTC)
    assert sum(1 for r in page.races if r.race_number is None) == 1  # one race comes without `number`


@pytest.mark.parametrize(
    ("status", "names", "expected"),
    [
        ("Final", (FINAL,), True),
        ("FINAL", (FINAL,), True),  # sources differ in case
        ("final ", (FINAL,), True),
        ("Live", (LIVE,), True),
        ("Interim", (FINAL, ABANDONED), False),
        (None, (FINAL,), False),
    ],
)
def test_status_is(status: str | None, names: tuple[str, ...], expected: bool) -> None:
    assert status_is(status, *names) is expected


def test_event_without_optional_blocks_and_with_unknown_status(event_payload: dict[str, Any]) -> None:
    payload = copy.deepcopy(event_payload)
    data = payload["data"]
    del data["results"], data["dividends"]  # omitted before a race is run
    data["race"]["status"] = "Live"
    data["race"]["actual_start"] = 0
    data["race"]["brand_new_field"] = {"nested": True}
    del data["runners"][0]["odds"]
    data["runners"][1]["odds"] = None
    data["runners"][2]["odds"] = {"fixed_win": 3.5}
    event = parse_event_response(payload)
    assert event.race.status == "Live" and status_is(event.race.status, LIVE)
    assert event.results == [] and event.dividends == []
    assert event.race.actual_start is None
    assert event.runners[0].odds.fixed_win is None and event.runners[1].odds.pool_win is None
    assert event.runners[2].odds.fixed_win == 3.5 and event.runners[2].odds.pool_place is None
    assert not (event.is_final or event.is_interim or event.is_abandoned)


def test_lowercase_status_kept_as_given_and_matched(meetings_payload: dict[str, Any]) -> None:
    payload = copy.deepcopy(meetings_payload)
    payload["data"]["meetings"][0]["races"][0]["status"] = "abandoned"
    payload["data"]["meetings"][0]["surprise"] = [1, 2, 3]
    race = parse_meetings_response(payload)[0].races[0]
    assert race.status == "abandoned"
    assert status_is(race.status, ABANDONED)


def test_null_lists_read_as_empty() -> None:
    payload = {"header": {}, "params": {}, "data": {"meetings": None}}
    assert parse_meetings_response(payload) == []
    event = {"header": {}, "data": {"race": {"event_id": "e", "meeting_id": "m", "description": "R1", "race_number": 1,
                                              "status": "Open", "advertised_start": 1752713400}, "runners": None}}
    parsed = parse_event_response(event)
    assert parsed.runners == [] and parsed.race.advertised_start == dt.datetime(2025, 7, 17, 0, 50, tzinfo=dt.UTC)


def _meetings_with(mutate: Any, base: dict[str, Any]) -> dict[str, Any]:
    # The first five real meetings are enough to break, and copying them is cheap.
    payload = {**base, "data": {"meetings": copy.deepcopy(base["data"]["meetings"][:5])}}
    mutate(payload)
    return payload


@pytest.mark.parametrize(
    ("mutate", "message"),
    [
        (lambda p: p.pop("data"), "no data object"),
        (lambda p: p.pop("header"), "no header object"),
        (lambda p: p["data"].update(meetings={"a": 1}), "data.meetings is not a list (got dict)"),
        (lambda p: p["data"].pop("meetings"), "data.meetings is missing"),
        (lambda p: p["data"]["meetings"][3].pop("meeting"), "data.meetings[3].meeting: Field required"),
        (lambda p: p["data"]["meetings"][0]["races"][2].update(start_time="soon"),
         "data.meetings[0].races[2].start_time"),
        (lambda p: p.update(header={"error": "not found", "error_code": "404"}), "API error 404 'not found'"),
    ],
)
def test_malformed_meetings_name_endpoint_and_problem(
    meetings_payload: dict[str, Any], mutate: Any, message: str
) -> None:
    with pytest.raises(TabPayloadError) as raised:
        parse_meetings_response(_meetings_with(mutate, meetings_payload), endpoint="/meetings")
    assert raised.value.endpoint == "/meetings"
    assert str(raised.value).startswith("TAB /meetings response: ")
    assert message in str(raised.value)


@pytest.mark.parametrize(
    ("payload", "message"),
    [
        ([1, 2], "expected a JSON object {header, params, data}, got list"),
        ("<html>", "got str"),
        ({"header": {}, "data": {"runners": []}}, "data.race is missing or not an object"),
        ({"header": {}, "data": {"race": {"event_id": "x"}}}, "data.race.meeting_id: Field required (and"),
    ],
)
def test_malformed_event_names_endpoint(payload: Any, message: str) -> None:
    with pytest.raises(TabPayloadError, match=r"^TAB /events/\{id\} response: ") as raised:
        parse_event_response(payload)
    assert message in str(raised.value)


def test_races_list_needs_races(tab_samples_dir: Path) -> None:
    payload = _load(tab_samples_dir, RACES)
    payload["data"]["races"] = "none"
    with pytest.raises(TabPayloadError, match=r"TAB /list response: data.races is not a list"):
        parse_races_list_response(payload)


@pytest.mark.parametrize(("payload", "message"), [
    ([], "TAB /list?date=2026-11-29 response: expected a JSON object {header, params, data}, got list"),
    ({"header": {}, "data": {"races": [{}]}},
     "TAB /list?date=2026-11-29 response: data.races[0].id: Field required (and 3 more problems)"),
])
def test_a_bad_races_page_names_its_request_and_the_place_in_the_data(payload, message: str) -> None:
    with pytest.raises(TabPayloadError) as refused:
        parse_races_list_response(payload, "/list?date=2026-11-29")
    assert str(refused.value) == message
