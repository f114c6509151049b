"""The Dagster instance's storage: dagster-postgres' own, keeping its connections in the daemon.

dagster-postgres opens a new connection for every storage call (SQLAlchemy's NullPool), so that short-lived processes
(run workers, sensor evaluations in a code server) hold none open. The daemon is the opposite: one process for the life
of the deployment, whose threads (sensors, schedules, the run queue every 2 s, run monitoring, the event-log consumer)
make storage calls all the time. On the compose deployment that was about 16 new connections a second
(pg_stat_database.sessions), each a forked Postgres backend plus its authentication: ~4 ms of CPU apiece on the 2-core
reference machine, ~3.6 ms of it in Postgres (bench/storage_pool.py).

A process that sets KEEP_CONNECTIONS_VARIABLE to 1 (docker-compose.yml and the Kubernetes daemon set it for the daemon
alone) configures each of its three storages as Dagster configures the webserver's: the storages' public
`optimize_for_webserver`, one connection kept per storage and up to POOL_MAX_OVERFLOW more in a burst of the daemon's
threads, closed after use. A kept connection is checked before each use (SQLAlchemy's pool `checkout` event, its
documented pessimistic disconnect handling), so a Postgres restart costs a reconnect, not a failed call. Run
containers never get the variable (deploy/dagster.yaml passes named variables only), so 25 concurrent runs hold no
idle connections. The local stack's instance (dagster.yaml) names this storage too, and `make run` sets the variable
for `dagster dev`, whose processes share one environment: its daemon, webserver and code servers keep connections, and
so does each local run worker while it runs (a few, closed when it exits).

A kept connection is closed when its storage is garbage-collected: Dagster's `DagsterInstance.dispose()` does not reach
a storage's engine (the webserver's connections live as long as its process, too). `close_kept_connections` closes them
at once, for a process that makes and drops instances (the test suite).

Every new instance (a sensor evaluation in a code server, a run worker, a `dagster` command) also asks first, in one
query, whether dagster-postgres' tables are all there, and tells the three storages so: each would otherwise inspect
the database on a connection of its own, only to find nothing to create (BASE_TABLES_PRESENT). Where a table is
missing (a fresh database, `migrate`), dagster-postgres creates it as before.

Both images load this module by name from the instance's `storage: custom:` block (deploy/dagster.yaml), as the
tests' instances do (tests/conftest.py): the user-code image has it in the project's wheel; the Dagster image, which
holds no project package, gets this file and the package's empty `__init__` only (deploy/Dockerfile.dagster). So it
imports Dagster's public packages (and SQLAlchemy, which dagster-postgres brings) alone.
"""

from __future__ import annotations

import os
import weakref
from collections.abc import Mapping

import sqlalchemy as sa
from dagster_postgres import DagsterPostgresStorage
from dagster_postgres.utils import create_pg_engine, get_token_provider_from_config, pg_url_from_config

KEEP_CONNECTIONS_VARIABLE = "DAGSTER_STORAGE_KEEP_CONNECTIONS"
POOL_MAX_OVERFLOW = 8  # more at once in a burst of the daemon's threads, closed after use
POOL_RECYCLE_SECONDS = 3600
NO_STATEMENT_TIMEOUT = 0  # the daemon's own calls run as long as dagster-postgres' do elsewhere

# Every engine that keeps connections in this process, for close_kept_connections.
_ENGINES_KEEPING_CONNECTIONS: weakref.WeakSet[sa.Engine] = weakref.WeakSet()


def keeps_connections(environ: Mapping[str, str] | None = None) -> bool:
    """Whether KEEP_CONNECTIONS_VARIABLE asks this process to keep its storage connections: "1" yes, unset, empty or
    "0" no. Anything else stops the process at start-up with an error naming the variable."""
    value = (os.environ if environ is None else environ).get(KEEP_CONNECTIONS_VARIABLE, "").strip()
    if value not in {"", "0", "1"}:
        raise ValueError(f"{KEEP_CONNECTIONS_VARIABLE} must be 1 (keep one connection per storage) or 0 (open one per "
                         f"call), not {value!r}")
    return value == "1"


def ping_before_use(dbapi_connection, connection_record, connection_proxy) -> None:
    """A pool `checkout` listener: a kept connection that no longer answers (Postgres restarted, the backend was
    terminated) is replaced before the storage call uses it. SQLAlchemy drops the connection on DisconnectionError and
    checks out a fresh one."""
    cursor = dbapi_connection.cursor()
    try:
        cursor.execute("SELECT 1")
    except Exception as error:  # noqa: BLE001 - any failure of the ping means the connection is gone
        raise sa.exc.DisconnectionError(f"kept storage connection no longer answers: {error}") from error
    finally:
        try:
            cursor.close()
        except Exception:  # noqa: BLE001, S110 - closing a cursor of a dead connection may fail too
            pass


def close_kept_connections() -> int:
    """Closes the connections every storage of this process keeps; returns how many engines it closed. A storage still
    in use opens new ones when called again."""
    engines = list(_ENGINES_KEEPING_CONNECTIONS)
    for engine in engines:
        engine.dispose()
    return len(engines)


# What dagster-postgres' storages look for before creating their tables (`should_autocreate_tables`, on by default):
# the run storage `runs` and then `instance_info`, the event log `event_logs`, the schedule storage `jobs` or its older
# `schedules`. Each storage asks with an inspection of its own on a connection of its own, in every new instance: a
# sensor evaluation in a code server, a run worker, a CLI command. Where all are present that finds nothing to do, and
# one query on one connection tells the same for ~40% of the host CPU of a new instance's first storage call
# (bench/instance_start.py).
BASE_TABLES_PRESENT = sa.text(
    "SELECT to_regclass('runs') IS NOT NULL AND to_regclass('instance_info') IS NOT NULL"
    " AND to_regclass('event_logs') IS NOT NULL"
    " AND (to_regclass('jobs') IS NOT NULL OR to_regclass('schedules') IS NOT NULL)"
)
BASE_TABLES_CONNECT_TIMEOUT_SECONDS = 10


def base_tables_present(postgres_url: str, token_provider=None) -> bool:
    """Whether every table dagster-postgres creates on its own is there already, so its storages need not look again.
    False when Postgres cannot be asked: the storages then take their own path, with dagster-postgres' retries."""
    engine = create_pg_engine(postgres_url, token_provider, poolclass=sa.pool.NullPool,
                              connect_args={"connect_timeout": BASE_TABLES_CONNECT_TIMEOUT_SECONDS})
    try:
        with engine.connect() as connection:
            return bool(connection.execute(BASE_TABLES_PRESENT).scalar())
    except sa.exc.SQLAlchemyError:
        return False
    finally:
        engine.dispose()


def engine_of(storage) -> sa.Engine:
    """The engine a dagster-postgres storage uses, through its public connection methods (the event log's
    `index_connection`, the run and schedule storages' `connect`)."""
    connect = storage.index_connection if hasattr(storage, "index_connection") else storage.connect
    with connect() as connection:
        return connection.engine


class PooledPostgresStorage(DagsterPostgresStorage):
    """dagster-postgres' storage (same config, tables and behaviour) whose run, event-log and schedule storages each
    keep a connection open when the process sets KEEP_CONNECTIONS_VARIABLE; without it, DagsterPostgresStorage."""

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        if keeps_connections():
            for storage in (self.run_storage, self.event_log_storage, self.schedule_storage):
                storage.optimize_for_webserver(statement_timeout=NO_STATEMENT_TIMEOUT,
                                               pool_recycle=POOL_RECYCLE_SECONDS, max_overflow=POOL_MAX_OVERFLOW)
                engine = engine_of(storage)
                sa.event.listen(engine, "checkout", ping_before_use)
                _ENGINES_KEEPING_CONNECTIONS.add(engine)
                weakref.finalize(self, engine.dispose)

    @classmethod
    def from_config_value(cls, inst_data, config_value) -> PooledPostgresStorage:  # dagster-postgres' own, for cls
        url, token_provider = pg_url_from_config(config_value), get_token_provider_from_config(config_value)
        autocreate = config_value.get("should_autocreate_tables", True) and not base_tables_present(url, token_provider)
        return cls(inst_data=inst_data, postgres_url=url, should_autocreate_tables=autocreate,
                   token_provider=token_provider)
