"""Programmatic Alembic migrations for the race database (env.py and versions/ live beside this file).

Alembic is imported only when a migration runs (`racing db upgrade`, the compose migrate service, `make run`): the
schema check every racing process makes (code server, run worker or container, sensor) reads the version table with
plain SQL and compares it with `HEAD_REVISION`, so none of them loads Alembic and Mako (~8 MiB of each such
process: BENCHMARKS.md "Process start-up"). A test fails when a new migration does not move `HEAD_REVISION`.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING

import sqlalchemy as sa
from sqlalchemy.engine import make_url

from orchestration_core.postgres import alembic_revision, create_engine

if TYPE_CHECKING:
    from alembic.config import Config

MIGRATIONS_DIR = Path(__file__).resolve().parent
# The newest migration's revision (versions/): the revision this code expects.
HEAD_REVISION = "0003"
# Alembic's default version table (env.py names none).
VERSION_TABLE = "alembic_version"
UPGRADE_COMMAND = "racing db upgrade"
# Serialises concurrent upgrades (e.g. `make run` and a job starting together); any constant unique to this schema.
_UPGRADE_LOCK_KEY = 0x7261636564625F31  # "raceb_1"


class SchemaBehindError(RuntimeError):
    """The race database is not at the revision this code expects."""


def normalise_url(url: str) -> str:
    """Return `url` with the psycopg2 driver; reject anything that is not Postgres."""
    if not url:
        raise ValueError("race database URL is empty: set RACING_DATABASE_URL or pass --url")
    parsed = make_url(url)
    if parsed.drivername.split("+")[0] not in ("postgresql", "postgres"):
        raise ValueError(f"race database must be Postgres (postgresql+psycopg2://...), got {parsed.drivername!r}")
    # psycopg 3 is not installed on purpose: dagster-postgres needs psycopg2 and both share the URL convention.
    return parsed.set(drivername="postgresql+psycopg2").render_as_string(hide_password=False)


def alembic_config(url: str | None = None) -> Config:
    """An Alembic config pointing at the migrations inside this package (no alembic.ini needed)."""
    from alembic.config import Config

    config = Config()
    config.set_main_option("script_location", str(MIGRATIONS_DIR))
    if url:
        # ConfigParser interpolates '%' (as in URL-encoded passwords); double it.
        config.set_main_option("sqlalchemy.url", normalise_url(url).replace("%", "%%"))
    return config


def head_revision() -> str:
    """The revision this code expects."""
    return HEAD_REVISION


@contextmanager
def _engine(url_or_engine: str | sa.Engine) -> Iterator[sa.Engine]:
    if isinstance(url_or_engine, sa.Engine):
        yield url_or_engine
        return
    engine = create_engine(normalise_url(url_or_engine), "oneshot")
    try:
        yield engine
    finally:
        engine.dispose()


def upgrade(url_or_engine: str | sa.Engine, revision: str = "head") -> str | None:
    """Apply migrations up to `revision` in one transaction; return the resulting revision."""
    with _engine(url_or_engine) as engine:
        with engine.begin() as conn:
            conn.execute(sa.select(sa.func.pg_advisory_xact_lock(_UPGRADE_LOCK_KEY)))
            from alembic import command

            config = alembic_config()
            config.attributes["connection"] = conn
            command.upgrade(config, revision)
        return current_revision(engine)


def current_revision(url_or_engine: str | sa.Engine) -> str | None:
    """The revision the database is at, or None for a database never migrated."""
    with _engine(url_or_engine) as engine, engine.connect() as conn:
        return alembic_revision(conn, VERSION_TABLE)


def schema_problem(current: str | None, expected: str) -> str | None:
    """Why a database at `current` cannot serve code expecting `expected`, or None when it can."""
    if current == expected:
        return None
    shown = current or "none (empty database)"
    return f"race database schema is at revision {shown}, code expects {expected}: run `{UPGRADE_COMMAND}`"


def assert_schema_current(url_or_engine: str | sa.Engine) -> None:
    """Raise `SchemaBehindError` naming `racing db upgrade` unless the database is at the head revision."""
    if problem := schema_problem(current_revision(url_or_engine), head_revision()):
        raise SchemaBehindError(problem)
