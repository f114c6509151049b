"""maintenance_jobs/text_rules.py: how deep a task's config and a request body may nest (boundary rows on the limit),
and the character a refused label names."""

from __future__ import annotations

import json

import pytest

from maintenance_jobs.text_rules import check_label, json_nesting_over, nesting_depth_over, unshowable_character

pytestmark = pytest.mark.unit


def nested(depth: int, kind: str = "list") -> object:
    """`depth` containers one inside the other: a list or dict at each level, 1 is a flat one."""
    value: object = [] if kind == "list" else {}
    for _ in range(depth - 1):
        value = [value] if kind == "list" else {"k": value}
    return value


@pytest.mark.parametrize("kind", ["list", "dict"])
@pytest.mark.parametrize(("depth", "limit", "over"), [(1, 1, False), (2, 1, True), (3, 3, False), (4, 3, True),
                                                      (32, 32, False), (33, 32, True)])
def test_nesting_depth_over_the_limit(kind: str, depth: int, limit: int, over: bool) -> None:
    assert nesting_depth_over(nested(depth, kind), limit) is over
    assert json_nesting_over(json.dumps(nested(depth, kind)).encode(), limit) is over


@pytest.mark.parametrize(("value", "limit", "over"), [
    ("text", 0, False),  # no container at all
    (7, 0, False),
    ({"a": 1, "b": "x"}, 1, False),
    ({"a": [1, {"b": []}]}, 3, True),  # the depth of a dict's values counts: four levels
    ({"a": [1, {"b": []}]}, 4, False),
    ([[], [[], [[]]]], 4, False),  # the deepest branch decides, not the first
    ([[], [[], [[[]]]]], 4, True),
    (({"a": ()},), 2, True),  # tuples count as lists
    ({"k": [1, 2, 3]}, 1, True),
])
def test_nesting_depth_of_mixed_values(value: object, limit: int, over: bool) -> None:
    assert nesting_depth_over(value, limit) is over


@pytest.mark.parametrize(("body", "limit", "over"), [
    (b'{"a": "[[[[[["}', 1, False),  # brackets inside strings do not count
    (b'{"a": "\\"[[[["}', 1, False),  # nor after an escaped quote
    (b'[[1], [2], [3]]', 2, False),  # closing brackets bring the depth back
    (b'[[1], [[2]]]', 2, True),
    (b'[{}, {}, {}]', 2, False),  # a closed object brings it back too
    (b'[[[], [[]]]]', 3, True),  # each close takes one level off, not all but one
    (b'{"a": {"b": {}}}', 3, False),
    (b'{"a": {"b": {}}}', 2, True),
    (b"", 0, False),
    (b"[" * 100_000, 64, True),  # stops at the limit instead of scanning on
])
def test_json_nesting_over_scans_the_raw_text(body: bytes, limit: int, over: bool) -> None:
    assert json_nesting_over(body, limit) is over


@pytest.mark.parametrize(("value", "found"), [
    ("nightly backup", None),
    ("", None),
    ("a\x00b", "U+0000"),
    ("tab\there", "U+0009"),
    ("o\u200bps", "U+200B"),
    ("exe\u202etxt", "U+202E"),
    ("x\x7f\u2028", "U+007F"),  # the first of several
    ("\U000e0041", "U+E0041"),  # five hex digits when the code point needs them
])
def test_the_first_unshowable_character_is_named(value: str, found: str | None) -> None:
    assert unshowable_character(value) == found


def test_a_label_with_one_is_refused_naming_it() -> None:
    assert check_label("nightly backup") == "nightly backup"
    with pytest.raises(ValueError) as refused:
        check_label("o\u200bps")
    assert str(refused.value) == ("must not contain control, bidirectional formatting or invisible characters "
                                  "(found U+200B)")
