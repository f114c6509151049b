"""The dev stack's database helpers, on the session's Postgres: databases created once, pinned to UTC, dropped."""

from __future__ import annotations

import uuid

import pytest
import sqlalchemy as sa

from local_stack.embedded_postgres import database_url, drop_database, ensure_database
from orchestration_core.postgres import psycopg2_url

pytestmark = pytest.mark.integration


@pytest.mark.parametrize(
    ("url", "expected"),
    [
        ("postgresql://u:p@h:5432/d", "postgresql+psycopg2://u:p@h:5432/d"),
        ("postgres://u@h/d", "postgresql+psycopg2://u@h/d"),
        ("postgresql+psycopg://u@h/d", "postgresql+psycopg2://u@h/d"),
        ("postgresql+psycopg2://u@h/d", "postgresql+psycopg2://u@h/d"),
    ],
)
def test_urls_are_normalised_to_psycopg2(url: str, expected: str) -> None:
    assert psycopg2_url(url) == expected


def test_database_url_swaps_only_the_database() -> None:
    assert database_url("postgresql://u:p@h:5/admin?sslmode=disable", "racing") == (
        "postgresql+psycopg2://u:p@h:5/racing?sslmode=disable")


def test_ensure_is_idempotent_pins_utc_and_drop_removes(postgres_server_url: str) -> None:
    name = f"ls_{uuid.uuid4().hex[:10]}"
    url = ensure_database(postgres_server_url, name)
    assert ensure_database(postgres_server_url, name) == url
    engine = sa.create_engine(url)
    try:
        with engine.connect() as conn:
            assert conn.execute(sa.text("SHOW timezone")).scalar() == "UTC"
    finally:
        engine.dispose()
    drop_database(postgres_server_url, name)
    admin = sa.create_engine(database_url(postgres_server_url, "postgres"))
    try:
        with admin.connect() as conn:
            assert conn.execute(sa.text("SELECT 1 FROM pg_database WHERE datname = :n"), {"n": name}).first() is None
    finally:
        admin.dispose()
