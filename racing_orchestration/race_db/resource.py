"""`RaceDatabase`: the Dagster resource for the race database (Postgres, URL from RACING_DATABASE_URL)."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

import dagster as dg
import sqlalchemy as sa
from pydantic import PrivateAttr

from orchestration_core.postgres import create_engine
from racing_orchestration.race_db.migrations import assert_schema_current, normalise_url


class RaceDatabase(dg.ConfigurableResource):
    """The race database; refuses to work (naming `racing db upgrade`) when its schema is behind the code."""

    url: str

    _engine: sa.Engine | None = PrivateAttr(default=None)

    def engine(self) -> sa.Engine:
        """One engine per resource instance, created and schema-checked on first use."""
        if self._engine is None:
            engine = create_engine(normalise_url(self.url), "run")
            try:
                assert_schema_current(engine)
            except Exception:
                engine.dispose()
                raise
            self._engine = engine
        return self._engine

    @contextmanager
    def begin(self) -> Iterator[sa.Connection]:
        """A connection inside a transaction: committed on success, rolled back on error."""
        with self.engine().begin() as conn:
            yield conn

    @contextmanager
    def connect(self) -> Iterator[sa.Connection]:
        """A connection for reads (no transaction committed)."""
        with self.engine().connect() as conn:
            yield conn

    def dispose(self) -> None:
        if self._engine is not None:
            self._engine.dispose()
            self._engine = None

    def teardown_after_execution(self, context: dg.InitResourceContext) -> None:
        self.dispose()
