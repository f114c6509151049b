"""Fixtures of the maintenance tests: a migrated registry database on the session's Postgres."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
import sqlalchemy as sa

from maintenance_jobs.resources import MaintenanceRegistryResource
from tests.orchestration_core.audit.conftest import webhook  # noqa: F401 (the capturing alert webhook fixture)


@pytest.fixture
def registry_engine(registry_url: str) -> Iterator[sa.Engine]:
    engine = sa.create_engine(registry_url)
    yield engine
    engine.dispose()


@pytest.fixture
def registry_resource(registry_url: str) -> MaintenanceRegistryResource:
    return MaintenanceRegistryResource(database_url=registry_url, timezone="Pacific/Auckland")
