"""One class of unshowable characters (orchestration_core/unshowable.py) for what TAB sends and what a task is
labelled: TAB text shows each escaped, a label holding one is refused, and their neighbours pass both. A row on
each edge of each range."""

from __future__ import annotations

import pytest

from maintenance_jobs.text_rules import unshowable_character
from racing_orchestration.tab.showable import showable

pytestmark = pytest.mark.unit

# (character, unshowable?)
EDGES = [
    ("\x00", True), ("\x1f", True), ("\x20", False),  # C0 ends where the space begins
    ("\x7e", False), ("\x7f", True), ("\x9f", True), ("\xa0", False),  # DEL and C1, then NO-BREAK SPACE
    ("\u2027", False), ("\u2028", True), ("\u2029", True),  # the separators
    ("\u202a", True), ("\u202e", True), ("\u202f", False),  # embeddings and overrides; NARROW NO-BREAK SPACE after
    ("\u2065", False), ("\u2066", True), ("\u2069", True),  # isolates
    ("\u200a", False), ("\u200b", True), ("\u200d", True),  # zero-width space and joiners after HAIR SPACE
    ("\u200e", True), ("\u200f", True), ("\u2010", False), ("\u061c", True), ("\u061b", False),  # marks
    ("\u205f", False), ("\u2060", True), ("\u2064", True),  # word joiner and invisible operators
    ("\ufeff", True), ("\ufefc", False),  # the byte order mark
    ("\U000dffff", False), ("\U000e0000", True), ("\U000e007f", True), ("\U000e0080", False),  # tag characters
    ("\ud7ff", False), ("\ud800", True), ("\udfff", True), ("\ue000", False),  # lone surrogates
    ("ā", False), ("½", False),  # Māori names and odds stay as they are
]


@pytest.mark.parametrize(("character", "unshowable"), EDGES, ids=[f"U+{ord(c):04X}" for c, _ in EDGES])
def test_tab_text_escapes_exactly_what_labels_refuse(character: str, unshowable: bool) -> None:
    shown = showable(f"a{character}b")
    escape = character.encode("unicode_escape").decode("ascii")  # Python's own spelling: \x1b, \u202e, \U000e0000
    assert shown == (f"a{escape}b" if unshowable else f"a{character}b")
    assert unshowable_character(f"a{character}b") == (f"U+{ord(character):04X}" if unshowable else None)
