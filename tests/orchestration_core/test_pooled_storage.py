"""The instance's storage (orchestration_core/pooled_storage.py): dagster-postgres' own, pooled only in a process that
sets DAGSTER_STORAGE_KEEP_CONNECTIONS (the compose and Kubernetes daemon), on a real Postgres."""

from __future__ import annotations

import ast
import gc
import time
from collections.abc import Iterator

import dagster as dg
import pytest
import sqlalchemy as sa
import yaml

from orchestration_core import pooled_storage
from orchestration_core.pooled_storage import (
    KEEP_CONNECTIONS_VARIABLE,
    PooledPostgresStorage,
    base_tables_present,
    close_kept_connections,
    engine_of,
    keeps_connections,
)
from local_stack.stack import free_port
from tests.conftest import REPO_ROOT, pooled_postgres_storage

MODULE = REPO_ROOT / "orchestration_core" / "pooled_storage.py"


@pytest.mark.unit
@pytest.mark.parametrize(("value", "keeps"), [(None, False), ("", False), ("0", False), ("1", True), (" 1 ", True)])
def test_keeping_connections_comes_from_the_variable(value: str | None, keeps: bool) -> None:
    environ = {} if value is None else {KEEP_CONNECTIONS_VARIABLE: value}
    assert keeps_connections(environ) is keeps


@pytest.mark.unit
@pytest.mark.parametrize("value", ["2", "01", "-1", "yes", "true", "1.0"])
def test_a_bad_setting_stops_the_process_naming_the_variable(value: str) -> None:
    with pytest.raises(ValueError, match=f"{KEEP_CONNECTIONS_VARIABLE} must be 1 .* or 0"):
        keeps_connections({KEEP_CONNECTIONS_VARIABLE: value})


@pytest.mark.unit
def test_the_module_imports_dagsters_public_packages_only() -> None:
    """The Dagster image holds this one file and no project package (deploy/Dockerfile.dagster)."""
    imported = set()
    for node in ast.walk(ast.parse(MODULE.read_text())):
        if isinstance(node, ast.Import):
            imported |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom):
            imported.add(node.module)
    assert imported == {"__future__", "os", "weakref", "collections.abc", "sqlalchemy", "dagster_postgres",
                        "dagster_postgres.utils"}


@pytest.mark.unit
def test_the_compose_instance_uses_it_and_the_dagster_image_has_it() -> None:
    storage = yaml.safe_load((REPO_ROOT / "deploy" / "dagster.yaml").read_text())["storage"]["custom"]
    assert (storage["module"], storage["class"]) == ("orchestration_core.pooled_storage", "PooledPostgresStorage")
    assert storage["config"] == {"postgres_url": {"env": "DAGSTER_POSTGRES_URL"}}
    dockerfile = (REPO_ROOT / "deploy" / "Dockerfile.dagster").read_text()
    copied = "COPY orchestration_core/__init__.py orchestration_core/pooled_storage.py /opt/dagster/lib/orchestration_core/"
    assert copied in dockerfile and "ENV PYTHONPATH=/opt/dagster/lib" in dockerfile
    ignore = (REPO_ROOT / "deploy" / "Dockerfile.dagster.dockerignore").read_text().splitlines()
    assert {"!orchestration_core/__init__.py", "!orchestration_core/pooled_storage.py"} <= set(ignore)


@pytest.mark.unit
def test_only_the_daemon_sets_the_pool_and_run_containers_never_get_it() -> None:
    compose = yaml.safe_load((REPO_ROOT / "docker-compose.yml").read_text())
    setting = {name: (service.get("environment") or {}).get(KEEP_CONNECTIONS_VARIABLE)
               for name, service in compose["services"].items()}
    assert {name: value for name, value in setting.items() if value is not None} == {"daemon": "1"}
    launcher = yaml.safe_load((REPO_ROOT / "deploy" / "dagster.yaml").read_text())["run_launcher"]["config"]
    assert KEEP_CONNECTIONS_VARIABLE not in launcher["env_vars"]


# --- on Postgres ------------------------------------------------------------------------------------------------------


def pooled_instance(url: str) -> Iterator[dg.DagsterInstance]:
    with dg.instance_for_test(overrides={"storage": pooled_postgres_storage(url)}) as instance:
        yield instance


def count_connects(instance: dg.DagsterInstance) -> list[int]:
    """A counter of the new database connections the instance's three storages open from now on."""
    opened = [0]
    for storage in (instance.run_storage, instance.event_log_storage, instance.schedule_storage):
        sa.event.listen(engine_of(storage), "connect", lambda *_: opened.__setitem__(0, opened[0] + 1))
    return opened


def storage_calls(instance: dg.DagsterInstance, calls: int) -> None:
    for i in range(calls):
        instance.get_run_records(dg.RunsFilter(statuses=[dg.DagsterRunStatus.QUEUED]), limit=5)
        instance.all_instigator_state()
        instance.all_logs("pool-test-run")
        instance.daemon_cursor_storage.set_cursor_values({"pool-test": str(i)})


@pytest.mark.integration
@pytest.mark.parametrize(("setting", "most_connections"), [("1", 3), ("", None)], ids=["daemon", "run worker"])
def test_the_daemon_keeps_its_connections_and_a_run_worker_opens_one_per_call(
    fresh_database_url: str, monkeypatch: pytest.MonkeyPatch, setting: str, most_connections: int | None
) -> None:
    monkeypatch.setenv(KEEP_CONNECTIONS_VARIABLE, setting)
    for instance in pooled_instance(fresh_database_url):
        assert isinstance(instance.get_ref().storage, PooledPostgresStorage)
        opened = count_connects(instance)
        storage_calls(instance, 20)
        if most_connections is None:  # dagster-postgres' NullPool: a connection per call (80 calls)
            assert opened[0] >= 80
        else:  # one thread: one connection per storage, kept
            assert opened[0] <= most_connections


@pytest.mark.integration
def test_a_pooled_daemon_survives_its_connections_being_cut(fresh_database_url: str,
                                                            monkeypatch: pytest.MonkeyPatch) -> None:
    """What a Postgres restart does to pooled connections: each is checked before use and replaced."""
    monkeypatch.setenv(KEEP_CONNECTIONS_VARIABLE, "1")
    for instance in pooled_instance(fresh_database_url):
        storage_calls(instance, 2)
        opened = count_connects(instance)
        database = sa.engine.make_url(fresh_database_url).database
        admin = sa.create_engine(fresh_database_url, poolclass=sa.pool.NullPool)
        with admin.connect() as conn:
            cut = conn.execute(sa.text("SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity "
                                       "WHERE datname = :d AND pid <> pg_backend_pid()"),
                               {"d": database}).scalar_one()
        admin.dispose()
        assert cut >= 3  # the three storages' kept connections
        storage_calls(instance, 5)
        assert instance.daemon_cursor_storage.get_cursor_values({"pool-test"}) == {"pool-test": "4"}
        assert 3 <= opened[0] <= 6  # reconnected, once per cut connection, not per call


@pytest.mark.integration
def test_a_run_launched_by_the_pooled_daemon_opens_no_pool(fresh_database_url: str,
                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    """A run container gets the daemon's instance by reference, but not its environment."""
    monkeypatch.setenv(KEEP_CONNECTIONS_VARIABLE, "1")
    for daemon in pooled_instance(fresh_database_url):
        assert type(engine_of(daemon.run_storage).pool).__name__ == "QueuePool"
        ref = daemon.get_ref()
        monkeypatch.delenv(KEEP_CONNECTIONS_VARIABLE)
        with dg.DagsterInstance.from_ref(ref) as run_worker:
            assert isinstance(run_worker.get_ref().storage, pooled_storage.PooledPostgresStorage)
            for storage in (run_worker.run_storage, run_worker.event_log_storage, run_worker.schedule_storage):
                assert type(engine_of(storage).pool).__name__ == "NullPool"


def connections_to(url: str) -> int:
    admin = sa.create_engine(url, poolclass=sa.pool.NullPool)
    try:
        with admin.connect() as conn:
            return conn.execute(sa.text("SELECT count(*) FROM pg_stat_activity WHERE datname = :d "
                                        "AND pid <> pg_backend_pid()"),
                                {"d": sa.engine.make_url(url).database}).scalar_one()
    finally:
        admin.dispose()


def connections_after_closing(url: str, settle_seconds: float = 10.0) -> int:
    """The connections left once closed ones are gone: a backend leaves pg_stat_activity a moment after its client
    closes the socket (under the full fast tier 2 were still listed right after), so this waits for the count to
    reach 0, up to `settle_seconds`, and returns the last count."""
    deadline = time.monotonic() + settle_seconds
    while (count := connections_to(url)) and time.monotonic() < deadline:
        time.sleep(0.2)
    return count


@pytest.mark.integration
def test_closing_kept_connections_leaves_none_open(fresh_database_url: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """Dagster's instance dispose() never closes a storage's engine: a process that makes and drops instances (the
    test suite: one per test) closes what they keep, or runs out of connections."""
    monkeypatch.setenv(KEEP_CONNECTIONS_VARIABLE, "1")
    for _ in range(3):
        for instance in pooled_instance(fresh_database_url):
            storage_calls(instance, 2)
            assert connections_to(fresh_database_url) >= 3  # kept while the instance lives
        assert connections_to(fresh_database_url) >= 3  # dispose() left them open
        assert close_kept_connections() >= 3
        assert connections_after_closing(fresh_database_url) == 0


@pytest.mark.integration
def test_a_collected_storage_closes_its_connections(fresh_database_url: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(KEEP_CONNECTIONS_VARIABLE, "1")
    storage = PooledPostgresStorage(postgres_url=fresh_database_url)
    storage.run_storage.get_runs(limit=1)
    assert connections_to(fresh_database_url) >= 3
    del storage
    gc.collect()
    assert connections_to(fresh_database_url) == 0


# --- the tables dagster-postgres creates on its own ------------------------------------------------------------------


def execute(url: str, sql: str) -> None:
    engine = sa.create_engine(url, poolclass=sa.pool.NullPool, isolation_level="AUTOCOMMIT")
    try:
        with engine.connect() as conn:
            conn.execute(sa.text(sql))
    finally:
        engine.dispose()


@pytest.fixture
def migrated_database_url(fresh_database_url: str) -> str:
    """A database whose Dagster tables an instance created, as `migrate` leaves it."""
    for instance in pooled_instance(fresh_database_url):
        instance.get_runs(limit=1)
    return fresh_database_url


@pytest.mark.integration
def test_a_fresh_database_gets_its_tables_from_the_first_instance(fresh_database_url: str) -> None:
    assert base_tables_present(fresh_database_url) is False
    for instance in pooled_instance(fresh_database_url):
        assert instance.get_runs(limit=1) == []
    assert base_tables_present(fresh_database_url) is True


@pytest.mark.integration
@pytest.mark.parametrize("table", ["runs", "instance_info", "event_logs", "jobs"])
def test_a_missing_table_is_seen_and_the_next_instance_creates_it(migrated_database_url: str, table: str) -> None:
    execute(migrated_database_url, f"DROP TABLE {table} CASCADE")
    assert base_tables_present(migrated_database_url) is False
    for instance in pooled_instance(migrated_database_url):
        instance.get_runs(limit=1)
    assert base_tables_present(migrated_database_url) is True


@pytest.mark.integration
def test_the_schedule_storages_older_table_counts_as_present(migrated_database_url: str) -> None:
    """dagster-postgres' schedule storage creates nothing where its older `schedules` table stands instead of `jobs`."""
    execute(migrated_database_url, "ALTER TABLE jobs RENAME TO schedules")
    assert base_tables_present(migrated_database_url) is True


@pytest.mark.integration
def test_a_database_that_cannot_be_asked_leaves_the_storages_their_own_path() -> None:
    started = time.monotonic()
    assert base_tables_present(f"postgresql+psycopg2://postgres@127.0.0.1:{free_port()}/nowhere") is False
    assert time.monotonic() - started < 5  # refused at once, not waited on


@pytest.mark.integration
def test_a_new_instance_on_a_migrated_database_connects_twice_before_its_first_answer(
    migrated_database_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """What each sensor evaluation in a code server and each run worker pays before its first storage call answers:
    the table check and the call, where each of dagster-postgres' three storages would inspect the database on a
    connection of its own (bench/instance_start.py)."""
    monkeypatch.setenv(KEEP_CONNECTIONS_VARIABLE, "")  # as in a code server and a run worker in production
    opened = [0]

    def count(*_) -> None:
        opened[0] += 1

    sa.event.listen(sa.engine.Engine, "connect", count)
    try:
        for instance in pooled_instance(migrated_database_url):
            instance.get_runs(limit=1)
    finally:
        sa.event.remove(sa.engine.Engine, "connect", count)
    assert opened[0] == 2
