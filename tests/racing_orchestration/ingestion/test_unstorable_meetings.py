"""One combination's scrape (`scrape_combination_once`) on a real race database, with TAB answering from a local HTTP
server: the real day's meetings sample with one value Postgres cannot store. The bad meeting (or race) is refused with
its reason in the `scrapes` audit and the combination's result; every other meeting and race of the response is
stored. Error text quoting TAB (terminal escapes, bidi characters) reaches neither `scrapes.error` nor the error.
"""

from __future__ import annotations

import datetime as dt
import json
import re
from pathlib import Path
from typing import Any

import pytest
import sqlalchemy as sa

from racing_orchestration.ingestion.combinations import ScrapeCombination
from racing_orchestration.ingestion.scrape import scrape_combination_once
from racing_orchestration.tab.client import TabApiError, TabClient
from racing_orchestration.tab.models import TabPayloadError
from tests.racing_orchestration.tab.hostile_server import Behaviour, hostile_server
from tests.racing_orchestration.tab.payload_edits import with_value

MEETINGS = "nz_meetings_list_2025-07-17.json"
COMBINATION = ScrapeCombination("T", "NZ", dt.date(2025, 7, 17))
ALL_MEETINGS, ALL_RACES = 76, 748
INT4_MAX, INT4_MIN = 2**31 - 1, -(2**31)
UNSHOWABLE = re.compile("[\x00-\x1f\x7f-\x9f\u2028\u2029\u202a-\u202e\u2066-\u2069\u200e\u200f\u061c\ud800-\udfff]")


@pytest.fixture(scope="module")
def sample(tab_samples_dir: Path) -> dict[str, Any]:
    return json.loads((tab_samples_dir / MEETINGS).read_text())


def _put(payload: dict, path: str, value: Any) -> bytes:
    return json.dumps(with_value(payload, path, value)).encode()


def _scrape(body: bytes, race_db, status: int = 200):
    with hostile_server(Behaviour("canned", status=status, body=body)) as url:
        return scrape_combination_once(TabClient(base_url=url, max_attempts=1, timeout_seconds=5), race_db,
                                       COMBINATION, "run-1")


def _stored(race_db) -> tuple[int, int, list]:
    with race_db.connect() as conn:
        meetings = conn.execute(sa.text("SELECT count(*) FROM meetings")).scalar()
        races = conn.execute(sa.text("SELECT count(*) FROM races")).scalar()
        calls = conn.execute(sa.text("SELECT outcome, status_code, items, error, run_id FROM scrapes")).all()
    return meetings, races, calls


# (path in the sample, hostile value, field the reason names, whether the whole meeting is refused)
HOSTILE = [
    ("data.meetings.5.name", "Awa\x00puni", "data.meetings[5].name", True),
    ("data.meetings.5.meeting", "id\x00", "data.meetings[5].meeting", True),
    ("data.meetings.5.state", "\ud800", "data.meetings[5].state", True),
    ("data.meetings.5.races.0.name", "R1\x00", "data.meetings[5].races[0].name", False),
    ("data.meetings.5.races.0.track_condition", "Good\x00", "data.meetings[5].races[0].track_condition", False),
    ("data.meetings.5.races.0.race_number", INT4_MAX + 1, "data.meetings[5].races[0].race_number", False),
    ("data.meetings.5.races.0.race_number", INT4_MIN - 1, "data.meetings[5].races[0].race_number", False),
    ("data.meetings.5.races.0.distance", 2**40, "data.meetings[5].races[0].distance", False),
]


@pytest.mark.integration
@pytest.mark.parametrize(("path", "value", "where", "whole_meeting"), HOSTILE,
                         ids=[f"{p.split('.', 3)[3]}={v!r}"[:40] for p, v, _, _ in HOSTILE])
def test_an_unstorable_value_costs_only_its_meeting_or_race(sample, race_db, path, value, where,
                                                             whole_meeting) -> None:
    races_of_meeting = len(sample["data"]["meetings"][5]["races"])
    result = _scrape(_put(sample, path, value), race_db)

    meetings, races, calls = _stored(race_db)
    expected = (ALL_MEETINGS - 1, ALL_RACES - races_of_meeting) if whole_meeting else (ALL_MEETINGS, ALL_RACES - 1)
    assert (meetings, races) == expected
    assert (result.status, result.meetings, result.races) == ("ok", *expected)
    assert result.error and where in result.error
    [call] = calls
    assert (call.outcome, call.status_code, call.items, call.run_id) == ("ok", 200, expected[0], "run-1")
    assert "refused 1 meeting(s)/race(s)" in call.error and where in call.error


@pytest.mark.integration
@pytest.mark.parametrize("value", [INT4_MAX, INT4_MIN])
def test_integers_on_the_int4_boundary_are_stored(sample, race_db, value: int) -> None:
    body = _put(json.loads(_put(sample, "data.meetings.5.races.0.race_number", value)),
                "data.meetings.5.races.0.distance", value)
    result = _scrape(body, race_db)
    assert (result.status, result.meetings, result.races, result.error) == ("ok", ALL_MEETINGS, ALL_RACES, None)
    race_id = sample["data"]["meetings"][5]["races"][0]["id"]
    with race_db.connect() as conn:
        row = conn.execute(sa.text("SELECT race_number, distance FROM races WHERE race_id = :r"), {"r": race_id}).one()
    assert tuple(row) == (value, value)


@pytest.mark.integration
def test_a_response_whose_every_meeting_is_refused_is_a_recorded_payload_error(sample, race_db) -> None:
    payload = {**sample, "data": {"meetings": sample["data"]["meetings"][:2]}}
    for meeting in payload["data"]["meetings"]:
        meeting["name"] = "\x00"
    with pytest.raises(TabPayloadError, match="every meeting was refused"):
        _scrape(json.dumps(payload).encode(), race_db)
    meetings, races, calls = _stored(race_db)
    assert (meetings, races) == (0, 0)
    [call] = calls
    assert call.outcome == "error" and "data.meetings[0].name" in call.error and "NUL" in call.error


@pytest.mark.integration
def test_hostile_error_text_reaches_neither_scrapes_nor_the_error(race_db) -> None:
    hostile = "\x1b]0;owned\x07\x1b[2J\x00\x85\u202eevil\u2066\u200f\u061c\u2028\ud800"
    body = json.dumps({"header": {"error": f"denied {hostile}"}, "data": None}).encode()
    with pytest.raises(TabApiError) as raised:
        _scrape(body, race_db, status=403)
    assert UNSHOWABLE.search(str(raised.value)) is None, repr(str(raised.value))
    assert "\\x1b" in str(raised.value)  # shown, escaped
    _, _, [call] = _stored(race_db)
    assert call.outcome == "error" and UNSHOWABLE.search(call.error) is None, repr(call.error)
