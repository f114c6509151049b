"""Parsing run tag values (maintenance_jobs/execution_history/tag_values.py), row by row on each boundary: an
unreadable value is absent, a number clamped, a text cut to its column; nothing raises."""

from __future__ import annotations

import datetime as dt

import pytest

from maintenance_jobs.execution_history import tag_values as tv
from tests.host_timezone import host_timezone

pytestmark = pytest.mark.unit
UTC = dt.UTC
BIG = "9" * 400


@pytest.mark.parametrize(("value", "expected"), [
    (None, 0), ("", 0), ("0", 0), ("1", 1), ("+2", 2), ("007", 7),
    ("999999", 999_999), ("1000000", 1_000_000), ("1000001", 1_000_000),  # the bound
    ("999999999999999", 1_000_000), ("9999999999999999", 1_000_000),  # 15 and 16 digits (converted / not)
    ("0000000000000000000003", 3),  # leading zeros are not magnitude
    ("2147483647", 1_000_000), ("2147483648", 1_000_000), (BIG, 1_000_000), ("1" + "0" * 5000, 1_000_000),
    ("-1", 0), ("-" + BIG, 0),
    (" 7", 0), ("7 ", 0), ("1_000", 0), ("1e3", 0), ("0x10", 0), ("7.0", 0), ("NaN", 0), ("+", 0), ("-", 0),
    ("\u0663", 0), ("\uff17", 0), ("7\n", 0),  # other scripts' digits (int() reads them), a trailing newline
])
def test_retry_number(value, expected) -> None:
    assert tv.retry_number(value) == expected


@pytest.mark.parametrize(("value", "expected"), [
    (None, None), ("", None), ("abc", None), ("0", 1), ("1", 1), ("2", 2), ("99", 99), ("100", 100), ("101", 100),
    ("-7", 1), (BIG, 100), ("-" + BIG, 1), ("50 ", None),
])
def test_priority(value, expected) -> None:
    assert tv.priority(value) == expected


@pytest.mark.parametrize(("value", "expected"), [
    (None, 0), ("12", 12), ("999999999", 999_999_999), ("1000000000", 1_000_000_000), ("1000000001", 1_000_000_000),
    (BIG, 1_000_000_000), ("-3", 0), ("3.5", 0),
])
def test_item_count(value, expected) -> None:
    assert tv.item_count(value) == expected


@pytest.mark.parametrize(("value", "expected"), [
    (None, None), ("3", 3), ("10", 10), ("1000001", 1_000_000), (BIG, 1_000_000), ("-1", 0), ("x", None),
])
def test_retry_limit(value, expected) -> None:
    assert tv.retry_limit(value) == expected


@pytest.mark.parametrize(("value", "expected"), [
    ("2025-06-03T03:05+12:00", dt.datetime(2025, 6, 2, 15, 5, tzinfo=UTC)),
    ("2025-06-03T03:05:00+00:00", dt.datetime(2025, 6, 3, 3, 5, tzinfo=UTC)),
    (None, None), ("", None), ("garbage", None), ("2025-06-03T03:05", None),  # no offset: ambiguous
    ("2025-13-01T00:00+00:00", None), ("2025-02-29T00:00+00:00", None),
    # The bounds: 1970-01-01T00:00Z is in, a minute before is not; 9000-01-01T00:00Z is out, a minute before in.
    ("1970-01-01T00:00+00:00", dt.datetime(1970, 1, 1, tzinfo=UTC)),
    ("1969-12-31T23:59+00:00", None),
    ("1970-01-01T00:59+01:00", None),
    ("8999-12-31T23:59+00:00", dt.datetime(8999, 12, 31, 23, 59, tzinfo=UTC)),
    ("9000-01-01T00:00+00:00", None),
    # The edges of the calendar: overflow once the offset applies, or out of the bounds.
    ("9999-12-31T23:59-14:00", None), ("9999-12-31T23:59+00:00", None), ("9999-12-31T23:59+14:00", None),
    ("0001-01-01T00:00+14:00", None), ("0001-01-01T00:00+00:00", None), ("0001-01-01T00:00-14:00", None),
    ("2025-06-03T03:05+12:00" + "0" * 5000, None), ("x" * 65, None), (BIG, None),
    ("\uff12\uff10\uff12\uff15-06-03T03:05+12:00", None),  # full-width digits
    # The length bound, on a valid minute padded with fractional seconds: 64 characters are read, 65 are not.
    ("2025-06-03T03:05:00." + "0" * 38 + "+12:00", dt.datetime(2025, 6, 2, 15, 5, tzinfo=UTC)),
    ("2025-06-03T03:05:00." + "0" * 39 + "+12:00", None),
    (202506030305, None), (["2025-06-03T03:05+12:00"], None),  # not text at all
])
def test_scheduled_minute(value, expected) -> None:
    assert tv.scheduled_minute(value) == expected


def test_a_scheduled_minute_is_read_as_utc_on_any_host() -> None:
    """The history stores and shows it in UTC, whatever the host's zone."""
    with host_timezone("Pacific/Auckland"):
        minute = tv.scheduled_minute("2025-06-03T03:05+12:00")
    assert minute.isoformat() == "2025-06-02T15:05:00+00:00"


@pytest.mark.parametrize(("value", "expected"), [
    (None, None), ("", ""), ("backup", "backup"), ("a" * 255, "a" * 255), ("a" * 256, "a" * 255),
])
def test_label(value, expected) -> None:
    assert tv.label(value) == expected


@pytest.mark.parametrize(("value", "expected"), [
    (None, None), ("done", "done"), ("o" * 2_000, "o" * 2_000), ("o" * 2_001, "o" * 2_000),
])
def test_text(value, expected) -> None:
    assert tv.text(value) == expected


@pytest.mark.parametrize(("value", "expected"), [
    ("scheduler", "scheduler"), ("manual", "manual"), ("retry", "retry"), (None, None), ("", None),
    ("Manual", None), ("manual\n", None), ("x" * 30, None),
])
def test_triggered_by(value, expected) -> None:
    assert tv.triggered_by(value) == expected


@pytest.mark.parametrize(("value", "expected"), [
    ("0bab8fc2-d9cc-42f7-a944-8ec38649ae66", "0bab8fc2-d9cc-42f7-a944-8ec38649ae66"), ("a" * 255, "a" * 255),
    ("a" * 256, None), ("", None), (None, None), ("run id", None), ("run\n", None), ("../x", None),
])
def test_run_id(value, expected) -> None:
    assert tv.run_id(value) == expected
