"""Invisible characters in task labels (service, description, created_by; maintenance_jobs/text_rules.py): zero-width
characters, the word joiner and invisible operators, the byte order mark and the tag characters are refused with the
character named; their visible neighbours stay allowed. One row per character on each boundary."""

from __future__ import annotations

import re

import pytest

from maintenance_jobs.models import TaskValidationError, validate_task
from maintenance_jobs.text_rules import check_label, unshowable_character
from tests.task_rows import task_data

pytestmark = pytest.mark.unit

REFUSED = [
    "\u200b",  # ZERO WIDTH SPACE
    "\u200c",  # ZERO WIDTH NON-JOINER
    "\u200d",  # ZERO WIDTH JOINER
    "\u2060",  # WORD JOINER
    "\u2061", "\u2062", "\u2063", "\u2064",  # invisible function application, times, separator, plus
    "\ufeff",  # ZERO WIDTH NO-BREAK SPACE (byte order mark)
    "\U000e0000", "\U000e0001",  # the first of the tag block, LANGUAGE TAG
    "\U000e0020", "\U000e0041", "\U000e007e",  # TAG SPACE, TAG LATIN CAPITAL LETTER A, TAG TILDE
    "\U000e007f",  # CANCEL TAG: the last of the block
]
ALLOWED = [
    "\u200a",  # HAIR SPACE: just below the zero-width block
    "\u205f",  # MEDIUM MATHEMATICAL SPACE: just below the word joiner
    "\ufefc", "\uff01",  # an Arabic ligature and a full-width '!' around the byte order mark
    "\U000dffff", "\U000e0080", "\U000e0100",  # around the tag block (E0100: a variation selector, visible use)
    "\u00e9", "\u4e2d", "\U0001f600",  # accented Latin, CJK, an emoji
]


def code(character: str) -> str:
    return f"U+{ord(character):04X}"


@pytest.mark.parametrize("character", REFUSED, ids=code)
def test_invisible_and_tag_characters_are_refused(character: str) -> None:
    assert unshowable_character(f"back{character}ups") == code(character)
    with pytest.raises(ValueError, match=re.escape(f"invisible characters (found {code(character)})")):
        check_label(character)
    for field in ("service", "description", "created_by"):
        with pytest.raises(TaskValidationError) as refused:
            validate_task(task_data("labelled", **{field: f"ops{character}"}))
        assert refused.value.field == field and code(character) in refused.value.message


@pytest.mark.parametrize("character", ALLOWED, ids=code)
def test_visible_neighbours_stay_allowed(character: str) -> None:
    assert unshowable_character(f"back{character}ups") is None
    assert check_label(f"back{character}ups") == f"back{character}ups"
    assert validate_task(task_data("labelled", service=f"ops{character}")).service == f"ops{character}"
