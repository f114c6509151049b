"""orchestration_core/tag_numbers.py: a number read back from a run tag anyone may have written is an integer clamped
into its readers' bounds, or None; never an error, a float or another script's digits."""

from __future__ import annotations

import pytest

from orchestration_core.tag_numbers import MAX_ITEM_COUNT, MAX_RETRY_NUMBER, clamped_int

pytestmark = pytest.mark.unit


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("7", 7),
        ("+7", 7),
        ("007", 7),
        ("0", 0),
        ("+0", 0),
        ("-0", 0),
        ("000", 0),
        ("-7", -7),
        ("-0000000000000000005", -5),  # leading zeros are not digits that count
        ("0000000000000000001", 1),
        ("999999999999999", 999_999_999_999_999),  # 15 digits: converted exactly
        ("-999999999999999", -999_999_999_999_999),
    ],
)
def test_an_integer_within_the_bounds_is_read_exactly(value: str, expected: int) -> None:
    assert clamped_int(value, -10**18, 10**18) == expected


@pytest.mark.parametrize(
    ("value", "low", "high", "expected"),
    [
        ("10", 0, 10, 10),  # on the upper bound
        ("11", 0, 10, 10),  # one above
        ("0", 0, 10, 0),  # on the lower bound
        ("-1", 0, 10, 0),  # one below
        ("5", 6, 10, 6),
        ("1000000000000000", 0, 10**18, 10**18),  # 16 digits: clamped unconverted, even under `high`
        ("-1000000000000000", -(10**18), 0, -(10**18)),
        ("9" * 400, 0, MAX_ITEM_COUNT, MAX_ITEM_COUNT),
        ("-" + "9" * 400, 0, MAX_RETRY_NUMBER, 0),
        ("+" + "9" * 400, 0, MAX_RETRY_NUMBER, MAX_RETRY_NUMBER),
    ],
)
def test_an_integer_outside_the_bounds_is_clamped(value: str, low: int, high: int, expected: int) -> None:
    assert clamped_int(value, low, high) == expected


@pytest.mark.parametrize(
    "value",
    [None, 7, 7.0, b"7", "", "+", "-", "+-7", "--7", " 7", "7 ", "7\n", "1_000", "1,000", "1.5", "1e3", "0x10", "٣",
     "７", "seven", "7a"],
)
def test_anything_but_ascii_digits_with_an_optional_sign_is_none(value) -> None:
    assert clamped_int(value, 0, MAX_ITEM_COUNT) is None

