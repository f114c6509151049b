"""One SQLAlchemy engine per database URL and process, so sensor ticks reuse pooled connections."""

from __future__ import annotations

from functools import lru_cache

import sqlalchemy as sa

from orchestration_core.postgres import create_engine


@lru_cache(maxsize=8)
def registry_engine(database_url: str) -> sa.Engine:
    """The pooled engine of the registry at `database_url` (normalised to psycopg2)."""
    return create_engine(database_url, "registry")
