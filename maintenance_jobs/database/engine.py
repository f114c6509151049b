"""One SQLAlchemy engine per database URL and process, so sensor ticks reuse pooled connections."""

from __future__ import annotations

from functools import lru_cache

import sqlalchemy as sa

from orchestration_core.postgres import psycopg2_url


@lru_cache(maxsize=8)
def registry_engine(database_url: str) -> sa.Engine:
    """The pooled engine of the registry at `database_url` (normalised to psycopg2)."""
    return sa.create_engine(psycopg2_url(database_url), pool_pre_ping=True, pool_size=2, max_overflow=4)
