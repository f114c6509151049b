"""Generic idempotent upsert for Postgres: write a row only when a compared column really differs."""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable, Iterable, Sequence
from typing import Any

import sqlalchemy as sa
from sqlalchemy.dialects.postgresql import insert as pg_insert

# Rows go through executemany with RETURNING, which SQLAlchemy sends as multi-row INSERTs of up to PAGE_ROWS rows
# ("insertmanyvalues", one round trip per page). Without RETURNING an ON CONFLICT insert falls back to one round
# trip per row, and a `.values([...])` statement costs more CPU to build and compile than the write itself (4x the
# CPU for a whole day's races: bench/race_db_upsert.py). The returned keys also count the rows really written.
PAGE_ROWS = 1000


def dedupe_rows(rows: Iterable[dict[str, Any]], key: Sequence[str]) -> list[dict[str, Any]]:
    """Rows unique by `key`, sorted by it.

    Postgres refuses to update one row twice in one statement, so the last occurrence (newest page) wins; sorting
    makes concurrent writers (the morning scrape's parallel steps) lock rows in the same order, avoiding deadlocks.
    """
    unique = {tuple(row[k] for k in key): row for row in rows}
    return [unique[k] for k in sorted(unique)]


def upsert_rows(
    conn: sa.Connection,
    table: sa.Table,
    rows: list[dict[str, Any]],
    key: Sequence[str],
    extra_set: Callable[[Any], dict[str, Any]] | None = None,
    compare: Sequence[str] | None = None,
) -> int:
    """INSERT ... ON CONFLICT (key) DO UPDATE only rows whose `compare` columns (default: all given) differ."""
    cols = [c for c in rows[0] if c not in key]
    compare = cols if compare is None else compare
    stmt = pg_insert(table)
    excluded = stmt.excluded
    set_: dict[str, Any] = {c: excluded[c] for c in cols}
    if "updated_at" in table.c:
        set_["updated_at"] = sa.func.now()
    if extra_set:
        set_.update(extra_set(excluded))
    changed = sa.tuple_(*(table.c[c] for c in compare)).is_distinct_from(sa.tuple_(*(excluded[c] for c in compare)))
    stmt = stmt.on_conflict_do_update(index_elements=list(key), set_=set_, where=changed)
    return written_rows(conn, stmt.returning(table.c[key[0]]), rows)


def written_rows(conn: sa.Connection, stmt: Any, rows: list[dict[str, Any]]) -> int:
    """Execute `stmt ... RETURNING` for every row, in pages; the number of rows it inserted or changed."""
    result = conn.execute(stmt.execution_options(insertmanyvalues_page_size=PAGE_ROWS), rows)
    return len(result.all())


def require_aware(value: dt.datetime, what: str) -> None:
    if value.tzinfo is None:
        raise ValueError(f"{what} must be timezone-aware (UTC), got naive {value.isoformat()}")
