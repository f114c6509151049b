"""Fixtures for the race database tests: a migrated Postgres database and the real TAB samples parsed."""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
import sqlalchemy as sa

from local_stack.embedded_postgres import drop_database, ensure_database
from racing_orchestration.race_db import schema
from racing_orchestration.race_db.migrations import upgrade
from racing_orchestration.tab.models import Event, Meeting, parse_event_response, parse_meetings_response

MEETINGS_SAMPLE = "nz_meetings_list_2025-07-17.json"
AWAPUNI_SAMPLE = "nz_event_final_results_dividends_awapuni_r1_2025-07-17.json"


@pytest.fixture(scope="module")
def race_db_url(postgres_server_url: str) -> Iterator[str]:
    """A database migrated to head, shared by one test module (creating a database costs ~1 s on this machine)."""
    name = f"race_db_{uuid.uuid4().hex[:12]}"
    url = ensure_database(postgres_server_url, name)
    try:
        upgrade(url)
        yield url
    finally:
        drop_database(postgres_server_url, name)


@pytest.fixture
def engine(race_db_url: str) -> Iterator[sa.Engine]:
    """An engine on the module's migrated database, emptied before each test so tests stay independent."""
    engine = sa.create_engine(race_db_url)
    tables = ", ".join(schema.metadata.tables)
    with engine.begin() as conn:
        conn.execute(sa.text(f"TRUNCATE {tables} RESTART IDENTITY CASCADE"))
    try:
        yield engine
    finally:
        engine.dispose()


@pytest.fixture(scope="session")
def sample_meetings(tab_samples_dir: Path) -> list[Meeting]:
    return parse_meetings_response(json.loads((tab_samples_dir / MEETINGS_SAMPLE).read_text()))


@pytest.fixture(scope="session")
def awapuni_event(tab_samples_dir: Path) -> Event:
    return parse_event_response(json.loads((tab_samples_dir / AWAPUNI_SAMPLE).read_text()))


def snapshot(conn: sa.Connection, table: str) -> list[tuple]:
    """Every row of `table` (updated_at included), in a stable order: equal snapshots mean nothing changed."""
    return [tuple(row) for row in conn.execute(sa.text(f"SELECT * FROM {table} ORDER BY 1, 2"))]
