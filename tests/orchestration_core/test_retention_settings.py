"""The retention settings: RUN_RETENTION_FAILED_DAYS (unset: forever; never shorter than the successes' 14 days) and
RACING_EXPORT_RETENTION_DAYS (unset: forever; at least 1)."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from orchestration_core.settings import SUCCESS_RETENTION_DAYS, PlatformSettings
from racing_orchestration.settings import RacingSettings

pytestmark = pytest.mark.unit


def test_the_success_retention_is_fourteen_days() -> None:
    assert SUCCESS_RETENTION_DAYS == 14


@pytest.mark.parametrize(("value", "expected"), [(None, None), ("", None), ("14", 14), ("15", 15), ("3650", 3650)])
def test_failed_run_retention_accepted(monkeypatch: pytest.MonkeyPatch, value: str | None, expected: int | None) -> None:
    if value is None:
        monkeypatch.delenv("RUN_RETENTION_FAILED_DAYS", raising=False)
    else:
        monkeypatch.setenv("RUN_RETENTION_FAILED_DAYS", value)
    assert PlatformSettings().run_retention_failed_days == expected


@pytest.mark.parametrize("value", ["13", "1", "0", "-5"])
def test_failed_run_retention_below_the_success_retention_is_refused(monkeypatch: pytest.MonkeyPatch, value: str) -> None:
    monkeypatch.setenv("RUN_RETENTION_FAILED_DAYS", value)
    with pytest.raises(ValidationError, match=f"RUN_RETENTION_FAILED_DAYS={value} is shorter than the 14 days"):
        PlatformSettings()


def test_failed_run_retention_that_is_not_a_number_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("RUN_RETENTION_FAILED_DAYS", "forever")
    with pytest.raises(ValidationError, match="run_retention_failed_days"):
        PlatformSettings()


@pytest.mark.parametrize(("value", "expected"), [(None, None), ("", None), ("1", 1), ("400", 400)])
def test_export_retention_accepted(monkeypatch: pytest.MonkeyPatch, value: str | None, expected: int | None) -> None:
    if value is None:
        monkeypatch.delenv("RACING_EXPORT_RETENTION_DAYS", raising=False)
    else:
        monkeypatch.setenv("RACING_EXPORT_RETENTION_DAYS", value)
    assert RacingSettings().racing_export_retention_days == expected


@pytest.mark.parametrize("value", ["0", "-1"])
def test_export_retention_below_one_day_is_refused(monkeypatch: pytest.MonkeyPatch, value: str) -> None:
    monkeypatch.setenv("RACING_EXPORT_RETENTION_DAYS", value)
    with pytest.raises(ValidationError, match="racing_export_retention_days"):
        RacingSettings()
