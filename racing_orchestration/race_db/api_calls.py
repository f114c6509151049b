"""A step's TAB client whose calls reach the `scrapes` table even when the step's request fails."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from racing_orchestration.race_db.resource import RaceDatabase
from racing_orchestration.race_db.store import record_scrapes
from racing_orchestration.tab.client import TabClient


@contextmanager
def recorded_client(tab_client: TabClient, race_db: RaceDatabase, run_id: str | None) -> Iterator[TabClient]:
    """A fork of `tab_client` with its own `calls` (steps run in parallel threads); on an error its calls are
    written to `scrapes` before the error propagates. On success the caller stores them with its own rows."""
    client = tab_client.fork()
    try:
        yield client
    except Exception:
        with race_db.begin() as conn:
            record_scrapes(conn, client.calls, run_id)
        raise
    finally:
        client.close()
