"""Values Postgres cannot store are refused at the parse boundary, with the field named: a NUL or a lone surrogate in
any string (text columns), an integer outside the column's int4 range, result runners listed twice, a blank dividend
id. One bad meeting or race of a /meetings page is refused on its own; the others are read.
"""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest

from racing_orchestration.tab.models import TabPayloadError, parse_event_response, parse_meetings_response
from tests.racing_orchestration.tab.payload_edits import with_value

pytestmark = pytest.mark.unit

MEETINGS = "nz_meetings_list_2025-07-17.json"
EVENT = "nz_event_final_results_dividends_awapuni_r1_2025-07-17.json"
INT4_MAX, INT4_MIN = 2**31 - 1, -(2**31)


@pytest.fixture(scope="module")
def meetings_payload(tab_samples_dir: Path) -> dict[str, Any]:
    payload = json.loads((tab_samples_dir / MEETINGS).read_text())
    return {**payload, "data": {"meetings": payload["data"]["meetings"][:5]}}


@pytest.fixture(scope="module")
def event_payload(tab_samples_dir: Path) -> dict[str, Any]:
    return json.loads((tab_samples_dir / EVENT).read_text())


# (path in the /meetings payload, hostile value, where the refusal must point)
MEETING_HOSTILE = [
    ("data.meetings.2.name", "Awa\x00puni", "data.meetings[2].name"),
    ("data.meetings.2.meeting", "\x00", "data.meetings[2].meeting"),
    ("data.meetings.2.state", "N\ud800Z", "data.meetings[2].state"),
    ("data.meetings.2.track_condition", "\x00", "data.meetings[2].track_condition"),
    ("data.meetings.2.races.0.name", "R1\x00", "data.meetings[2].races[0].name"),
    ("data.meetings.2.races.0.weather", "\udfff", "data.meetings[2].races[0].weather"),
    ("data.meetings.2.races.0.race_number", INT4_MAX + 1, "data.meetings[2].races[0].race_number"),
    ("data.meetings.2.races.0.race_number", INT4_MIN - 1, "data.meetings[2].races[0].race_number"),
    ("data.meetings.2.races.0.race_number", 10**30, "data.meetings[2].races[0].race_number"),
    ("data.meetings.2.races.0.distance", INT4_MAX + 1, "data.meetings[2].races[0].distance"),
    ("data.meetings.2.races.0.distance", 2**63, "data.meetings[2].races[0].distance"),
]


@pytest.mark.parametrize(("path", "value", "where"), MEETING_HOSTILE, ids=[f"{p}={v!r}"[-40:] for p, v, _ in
                                                                          MEETING_HOSTILE])
def test_an_unstorable_meeting_value_is_refused_naming_its_field(meetings_payload, path, value, where) -> None:
    with pytest.raises(TabPayloadError) as raised:
        parse_meetings_response(with_value(meetings_payload, path, value))
    assert raised.value.problem.startswith(where), raised.value.problem


@pytest.mark.parametrize("value", [INT4_MAX, INT4_MIN, 0])
def test_integers_on_the_int4_boundary_are_read(meetings_payload, value: int) -> None:
    payload = with_value(with_value(meetings_payload, "data.meetings.2.races.0.race_number", value),
                   "data.meetings.2.races.0.distance", value)
    race = parse_meetings_response(payload)[2].races[0]
    assert (race.race_number, race.distance) == (value, value or None)  # 0 is TAB's "unknown" distance


EVENT_HOSTILE = [
    ("data.race.description", "R1\x00", "data.race.description"),
    ("data.race.event_id", "e\x00", "data.race.event_id"),
    ("data.race.race_number", INT4_MAX + 1, "data.race.race_number"),
    ("data.race.distance", INT4_MIN - 1, "data.race.distance"),
    ("data.runners.0.name", "\x00", "data.runners[0].name"),
    ("data.runners.3.jockey", "J \ud800Smith", "data.runners[3].jockey"),
    ("data.runners.0.runner_number", INT4_MAX + 1, "data.runners[0].runner_number"),
    ("data.runners.0.barrier", 2**40, "data.runners[0].barrier"),
    ("data.results.0.position", INT4_MAX + 1, "data.results[0].position"),
    ("data.results.0.runner_number", -(2**40), "data.results[0].runner_number"),
    ("data.results.0.name", "\x00", "data.results[0].name"),
    ("data.dividends.0.product_name", "Win\x00", "data.dividends[0].product_name"),
    ("data.dividends.0.description", "\udc80", "data.dividends[0].description"),
    ("data.dividends.0.positions.0.runner_number", INT4_MAX + 1, "data.dividends[0].positions[0]"),
    ("data.dividends.0.id", "", "data.dividends[0]"),
    ("data.dividends.0.id", "  ", "data.dividends[0]"),
]


@pytest.mark.parametrize(("path", "value", "where"), EVENT_HOSTILE, ids=[f"{p}={v!r}"[-40:] for p, v, _ in
                                                                        EVENT_HOSTILE])
def test_an_unstorable_event_value_is_refused_naming_its_field(event_payload, path, value, where) -> None:
    with pytest.raises(TabPayloadError) as raised:
        parse_event_response(with_value(event_payload, path, value))
    assert raised.value.problem.startswith(where), raised.value.problem


def test_result_runners_listed_twice_are_refused(event_payload) -> None:
    payload = copy.deepcopy(event_payload)
    payload["data"]["results"][1]["runner_number"] = payload["data"]["results"][0]["runner_number"]
    with pytest.raises(TabPayloadError, match=r"data\.results: .*more than once"):
        parse_event_response(payload)


def test_the_sample_event_is_still_read_whole(event_payload) -> None:
    event = parse_event_response(event_payload)
    assert (len(event.runners), len(event.results), len(event.dividends)) == (8, 8, 14)
