"""Pure helpers of the race database: URL normalisation and the schema-behind message."""

from __future__ import annotations

import pytest

from racing_orchestration.race_db.migrations import normalise_url, schema_problem

pytestmark = pytest.mark.unit


def test_schema_problem_texts() -> None:
    assert schema_problem("0001", "0001") is None
    assert schema_problem("0001", "0002") == (
        "race database schema is at revision 0001, code expects 0002: run `racing db upgrade`"
    )
    assert schema_problem(None, "0002") == (
        "race database schema is at revision none (empty database), code expects 0002: run `racing db upgrade`"
    )


@pytest.mark.parametrize(
    ("given", "expected"),
    [
        ("postgresql://u:p@h:5432/db", "postgresql+psycopg2://u:p@h:5432/db"),
        ("postgres://u@h/db", "postgresql+psycopg2://u@h/db"),
        ("postgresql+psycopg://u@h/db", "postgresql+psycopg2://u@h/db"),  # psycopg 3 is not installed on purpose
        ("postgresql+psycopg2://u:p%40x@h/db", "postgresql+psycopg2://u:p%40x@h/db"),  # encoded password kept
    ],
)
def test_normalise_url(given: str, expected: str) -> None:
    assert normalise_url(given) == expected


@pytest.mark.parametrize("bad", ["", "sqlite:///x.db", "mysql://u@h/db"])
def test_normalise_url_rejects_non_postgres(bad: str) -> None:
    with pytest.raises(ValueError, match="RACING_DATABASE_URL|Postgres"):
        normalise_url(bad)
