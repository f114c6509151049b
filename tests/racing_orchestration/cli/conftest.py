"""Fixtures of the `racing` CLI tests."""

from __future__ import annotations

from pathlib import Path

import pytest


@pytest.fixture
def postgres_dagster_home(tmp_path: Path, dagster_database_url: str, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A DAGSTER_HOME whose instance is the session's Postgres storage, as `racing audit` reads it."""
    (tmp_path / "dagster.yaml").write_text(f"storage:\n  postgres:\n    postgres_url: {dagster_database_url}\n")
    monkeypatch.setenv("DAGSTER_HOME", str(tmp_path))
    return tmp_path
