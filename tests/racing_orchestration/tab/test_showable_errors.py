"""Terminal escapes and bidi characters sent by TAB never reach an error, a `scrapes.error` row or a terminal: the
client makes every piece of text it quotes from a response showable (`racing_orchestration.tab.showable`).

The server is a real local HTTP server; one row per character class (and several characters per class).
"""

from __future__ import annotations

import json
import re

import pytest

from racing_orchestration.tab.client import TabApiError, TabClient
from racing_orchestration.tab.models import TabPayloadError
from tests.racing_orchestration.tab.hostile_server import Behaviour, hostile_server

pytestmark = pytest.mark.unit

# Character classes that must never reach an error, tag, alert or terminal, with the characters tried.
HOSTILE = {
    "esc": ["\x1b", "\x1b[31m", "\x1b]0;owned\x07", "\x1b[2J"],
    "bel": ["\x07"],
    "nul": ["\x00"],
    "other-c0": ["\x01", "\x08", "\t", "\n", "\r", "\x0b", "\x0c", "\x1f"],
    "del": ["\x7f"],
    "c1": ["\x80", "\x85", "\x9b", "\x9d", "\x9f"],
    "bidi-embed-override": ["\u202a", "\u202b", "\u202c", "\u202d", "\u202e"],
    "bidi-isolate": ["\u2066", "\u2067", "\u2068", "\u2069"],
    "bidi-mark": ["\u200e", "\u200f", "\u061c"],
    "line-separator": ["\u2028", "\u2029"],
    "lone-surrogate": ["\ud800", "\udfff"],
}
CASES = [(kind, text) for kind, texts in HOSTILE.items() for text in texts]
IDS = [f"{kind}-{i}" for kind, texts in HOSTILE.items() for i, _ in enumerate(texts)]
UNSHOWABLE = re.compile("[\x00-\x1f\x7f-\x9f\u2028\u2029\u202a-\u202e\u2066-\u2069\u200e\u200f\u061c\ud800-\udfff]")


def _clean(text: str) -> None:
    assert UNSHOWABLE.search(text) is None, repr(text)


def _body(payload: dict) -> bytes:
    return json.dumps(payload).encode()  # ensure_ascii: every character travels as a \\u escape, as JSON allows


@pytest.mark.parametrize(("kind", "text"), CASES, ids=IDS)
def test_an_api_error_quoting_hostile_text_is_showable(kind: str, text: str) -> None:
    body = _body({"header": {"error": f"bad {text} request", "error_code": "400"}, "data": None})
    with hostile_server(Behaviour("canned", status=404, body=body)) as url:
        client = TabClient(base_url=url, max_attempts=1, timeout_seconds=5)
        with pytest.raises(TabApiError) as raised:
            client.get_event("r1")
    _clean(str(raised.value))
    _clean(client.calls[0].error)
    assert "bad " in str(raised.value) and " request" in str(raised.value)  # the rest of the text is kept


@pytest.mark.parametrize(("kind", "text"), CASES, ids=IDS)
def test_a_race_id_with_hostile_text_is_showable_in_the_error(kind: str, text: str) -> None:
    body = _body({"header": {"error": "not found"}, "data": None})
    with hostile_server(Behaviour("canned", status=404, body=body)) as url:
        client = TabClient(base_url=url, max_attempts=1, timeout_seconds=5)
        with pytest.raises(TabApiError) as raised:
            client.get_event(f"race{text}id")
    assert re.search(r"race\S+id", str(raised.value)), raised.value  # the id is named, its hostile part escaped
    _clean(str(raised.value))
    _clean(client.calls[0].error)


@pytest.mark.parametrize(("kind", "text"), CASES, ids=IDS)
def test_a_payload_error_quoting_hostile_text_is_showable(kind: str, text: str) -> None:
    # Not JSON: the error quotes the start of the body.
    body = f"<html>{text} gateway</html>".encode("utf-8", "surrogatepass")
    with hostile_server(Behaviour("canned", status=200, body=body)) as url:
        client = TabClient(base_url=url, max_attempts=1, timeout_seconds=5)
        with pytest.raises(TabPayloadError) as raised:
            client.get_event("r1")
    _clean(str(raised.value))
    _clean(raised.value.problem)
    _clean(client.calls[0].error)


@pytest.mark.parametrize(("kind", "text"), CASES, ids=IDS)
def test_showable_escapes_every_class_visibly_and_caps_the_length(kind: str, text: str) -> None:
    from racing_orchestration.tab.showable import showable

    shown = showable(f"a{text}b")
    _clean(shown)
    assert shown.startswith("a") and shown.endswith("b")
    assert "\\x" in shown or "\\u" in shown  # a visible escape, not a silent deletion
    long = showable(text * 10_000, limit=300)
    _clean(long)
    assert len(long) <= 300 and long.endswith("…")


@pytest.mark.parametrize(("text", "expected"), [
    ("plain text, Māori names and ½ odds", "plain text, Māori names and ½ odds"),
    ("\x1b[31mred", "\\x1b[31mred"),
    ("a\u202eb", "a\\u202eb"),
    ("x" * 500, "x" * 500),  # on the limit: kept whole
    ("x" * 501, "x" * 499 + "…"),  # one over: cut, and says so
])
def test_showable_keeps_printable_text_and_cuts_on_the_boundary(text: str, expected: str) -> None:
    from racing_orchestration.tab.showable import showable

    assert showable(text) == expected


@pytest.mark.parametrize(("character", "escape"), [
    ("\x00", "\\x00"),
    ("\xff", "\\xff"),  # the last two-digit escape
    ("\u0100", "\\u0100"),  # the first four-digit one
    ("\u202e", "\\u202e"),
    ("\uffff", "\\uffff"),  # the last four-digit one
    ("\U00010000", "\\U00010000"),  # past the Basic Multilingual Plane: eight digits
    ("\U000e0041", "\\U000e0041"),  # a tag character: `\ue0041` would read as U+E004 and a "1"
])
def test_each_character_is_written_as_python_writes_its_escape(character: str, escape: str) -> None:
    from racing_orchestration.tab.showable import visible_escape

    assert visible_escape(character) == escape == ascii(character)[1:-1]
