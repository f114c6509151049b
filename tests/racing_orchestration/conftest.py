"""Fixtures of the racing jobs: a migrated race database and the simulated TAB feed on a real socket."""

from collections.abc import Iterator

import pytest

from racing_orchestration.race_db import upgrade
from racing_orchestration.race_db.resource import RaceDatabase
from racing_orchestration.tab.client import TabClient
from racing_orchestration.tab.sim_engine import SimFeedConfig
from racing_orchestration.tab.sim_feed import SimFeedServer


@pytest.fixture
def racing_db_url(fresh_database_url: str) -> str:
    upgrade(fresh_database_url)
    return fresh_database_url


@pytest.fixture
def race_db(racing_db_url: str) -> Iterator[RaceDatabase]:
    db = RaceDatabase(url=racing_db_url)
    yield db
    db.dispose()


@pytest.fixture
def sim_feed() -> Iterator[SimFeedServer]:
    with SimFeedServer(SimFeedConfig(seed=7)) as server:
        yield server


@pytest.fixture
def tab_client(sim_feed: SimFeedServer) -> TabClient:
    return TabClient(base_url=sim_feed.base_url, retry_backoff_seconds=0.01, timeout_seconds=5)
