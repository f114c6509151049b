"""Postgres URLs and engines: one place for the driver rule and the pool settings every process uses."""

from __future__ import annotations

from sqlalchemy.engine import make_url


def psycopg2_url(url: str) -> str:
    """Normalise a Postgres URL to the psycopg2 driver (dagster-postgres cannot use psycopg 3)."""
    parsed = make_url(url)
    if parsed.drivername in ("postgresql", "postgres", "postgresql+psycopg"):
        parsed = parsed.set(drivername="postgresql+psycopg2")
    return parsed.render_as_string(hide_password=False)
