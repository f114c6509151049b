"""Fixtures of the maintenance tests: a migrated registry database on the session's Postgres."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
import sqlalchemy as sa

from maintenance_jobs.database.migrate import upgrade
from maintenance_jobs.resources import MaintenanceRegistryResource


@pytest.fixture
def registry_url(fresh_database_url: str) -> str:
    upgrade(fresh_database_url)
    return fresh_database_url


@pytest.fixture
def registry_engine(registry_url: str) -> Iterator[sa.Engine]:
    engine = sa.create_engine(registry_url)
    yield engine
    engine.dispose()


@pytest.fixture
def registry_resource(registry_url: str) -> MaintenanceRegistryResource:
    return MaintenanceRegistryResource(database_url=registry_url, timezone="Pacific/Auckland")


def task_data(name: str = "nightly", **changes) -> dict:
    """A valid example_executor task; keyword arguments override fields."""
    data = {
        "task_name": name,
        "service": "scheduler",
        "executor": "example_executor",
        "priority": 50,
        "config": {"message": "hi", "delay_seconds": 0},
    }
    return {**data, **changes}
