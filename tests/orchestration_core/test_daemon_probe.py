"""The daemon's container healthcheck: heartbeats read from a real Dagster run storage on Postgres, without importing
Dagster. (That the compose command names the instance's required daemon types: tests/deploy/test_instance.py.)"""

from __future__ import annotations

import subprocess
import sys
import time

import pytest
import sqlalchemy as sa
from dagster._daemon.types import DaemonHeartbeat
from dagster._utils.error import SerializableErrorInfo

from local_stack.stack import free_port
from orchestration_core.daemon_probe import heartbeat_problems, libpq_url, main, read_heartbeats
from tests.conftest import REPO_ROOT

NOW = 1_800_000_000.0
# Errors do not make a daemon dead: Dagster's liveness-check ignores them too (they reach /health and the UI).
ERROR = SerializableErrorInfo("a sensor failed", [], "Exception")


@pytest.mark.unit
@pytest.mark.parametrize(("beats", "required", "problems"), [
    ({"SENSOR": NOW - 10, "ASSET": NOW - 179}, ["SENSOR", "ASSET"], []),
    ({"SENSOR": NOW - 181}, ["SENSOR"], ["SENSOR: last heartbeat 181 s ago (limit 180 s)"]),
    ({"SENSOR": NOW - 10}, ["SENSOR", "ASSET"], ["ASSET: no heartbeat"]),
    ({"SENSOR": NOW + 60}, ["SENSOR"], []),  # a clock ahead of this one: recent, as in Dagster's own check
    ({"SENSOR": NOW - 500, "OTHER": NOW}, ["SENSOR"], ["SENSOR: last heartbeat 500 s ago (limit 180 s)"]),
    ({"OLD_UNREQUIRED": NOW - 9999}, [], []),
])
def test_heartbeat_problems(beats, required, problems) -> None:
    assert heartbeat_problems(beats, required, NOW, 180) == problems


@pytest.mark.unit
@pytest.mark.parametrize(("url", "expected"), [
    ("postgresql+psycopg2://dagster:pw@postgres:5432/dagster", "postgresql://dagster:pw@postgres:5432/dagster"),
    ("postgresql://u@/db?host=%2Ftmp%2Fpg", "postgresql://u@/db?host=%2Ftmp%2Fpg"),
])
def test_libpq_url(url, expected) -> None:
    assert libpq_url(url) == expected


@pytest.mark.unit
@pytest.mark.parametrize("url", ["", "sqlite:///x.db", "mysql://u@h/db", "postgres-ish"])
def test_a_url_that_is_not_postgres_is_refused(url) -> None:
    with pytest.raises(ValueError, match="not a postgresql"):
        libpq_url(url)


@pytest.mark.unit
@pytest.mark.parametrize("argv", [[], ["180"], ["0", "SENSOR"], ["-5", "SENSOR"], ["soon", "SENSOR"], ["nan"],
                                  ["nan", "SENSOR"], ["inf", "SENSOR"]])
def test_bad_arguments_exit_2(argv) -> None:
    assert main(argv) == 2


@pytest.mark.integration
def test_heartbeats_are_read_as_dagster_wrote_them(pg_instance, dagster_database_url, monkeypatch, capsys) -> None:
    written = time.time() - 42.5
    pg_instance.add_daemon_heartbeat(DaemonHeartbeat(written, "SENSOR", None, None))
    pg_instance.add_daemon_heartbeat(DaemonHeartbeat(written - 1000, "BACKFILL", None, [ERROR]))
    assert read_heartbeats(dagster_database_url) == pytest.approx({"SENSOR": written, "BACKFILL": written - 1000})
    monkeypatch.setenv("DAGSTER_POSTGRES_URL", dagster_database_url)
    assert main(["180", "SENSOR"]) == 0
    assert main(["180", "SENSOR", "BACKFILL"]) == 1
    assert "BACKFILL: last heartbeat 10" in capsys.readouterr().err


@pytest.mark.integration
def test_an_unreadable_heartbeat_fails_with_its_class_only(pg_instance, dagster_database_url, monkeypatch,
                                                          capsys) -> None:
    pg_instance.add_daemon_heartbeat(DaemonHeartbeat(time.time(), "SENSOR", None, None))
    engine = sa.create_engine(dagster_database_url)
    with engine.begin() as connection:
        connection.execute(sa.text("UPDATE daemon_heartbeats SET body = '{\"not\": \"a heartbeat\"}'"))
    engine.dispose()
    monkeypatch.setenv("DAGSTER_POSTGRES_URL", dagster_database_url)
    assert main(["180", "SENSOR"]) == 1
    assert capsys.readouterr().err.strip() == "daemon heartbeats unreadable: KeyError"


@pytest.mark.integration
def test_no_database_fails_without_printing_the_url(monkeypatch, capsys) -> None:
    monkeypatch.setenv("DAGSTER_POSTGRES_URL", f"postgresql+psycopg2://dagster:s3cret@127.0.0.1:{free_port()}/dagster")
    started = time.monotonic()
    assert main(["180", "SENSOR"]) == 1
    assert time.monotonic() - started < 10
    err = capsys.readouterr().err
    assert err.strip() == "daemon heartbeats unreadable: OperationalError" and "s3cret" not in err


@pytest.mark.integration
def test_the_probe_process_never_imports_dagster(pg_instance, dagster_database_url) -> None:
    """As the container runs it: the file alone (the Dagster image holds no project packages, so it must not import
    one), in a new Python process that never imports Dagster, the cost this probe exists to avoid."""
    pg_instance.add_daemon_heartbeat(DaemonHeartbeat(time.time(), "SENSOR", None, None))
    probe = str(REPO_ROOT / "orchestration_core" / "daemon_probe.py")
    answered = subprocess.run([sys.executable, "-X", "importtime", probe, "180", "SENSOR"], cwd=REPO_ROOT,
                              capture_output=True, text=True, timeout=60,
                              env={"DAGSTER_POSTGRES_URL": dagster_database_url, "PATH": "/usr/bin:/bin"})
    assert answered.returncode == 0, answered.stderr[-2000:]
    imported = {line.rsplit("|", 1)[-1].strip() for line in answered.stderr.splitlines() if "|" in line}
    assert "psycopg2" in imported and not any(name.split(".")[0] in ("dagster", "sqlalchemy") for name in imported)
