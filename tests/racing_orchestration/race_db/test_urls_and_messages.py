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


def test_offline_migration_sql_creates_every_table() -> None:
    # `--sql` mode (no database) renders the DDL for review; it must cover every table in schema.py.
    import io

    from alembic import command

    from racing_orchestration.race_db.migrations import alembic_config
    from racing_orchestration.race_db.schema import metadata

    buffer = io.StringIO()
    config = alembic_config("postgresql+psycopg2://nobody@localhost/none")
    config.output_buffer = buffer
    command.upgrade(config, "head", sql=True)
    sql = buffer.getvalue()
    assert {f"CREATE TABLE {name}" for name in metadata.tables} <= {
        line.split(" (")[0] for line in sql.splitlines() if line.startswith("CREATE TABLE")
    }
