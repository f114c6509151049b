"""The Dagster instance's storage: dagster-postgres' own, with a connection pool in the long-lived processes.

dagster-postgres opens a new connection for every storage call (SQLAlchemy's NullPool), so that short-lived processes
(run workers) hold none open. The long-lived processes are the opposite:
- the daemon, one process for the life of the deployment, whose threads (sensors, schedules, the run queue every 2 s,
  run monitoring, the event-log consumer) make storage calls all the time: on the compose deployment that was about
  16 new connections a second (pg_stat_database.sessions);
- a code server, which builds an instance for every sensor evaluation and drops it after, and whose sensors make a few
  dozen storage calls each: an idle local stack opened 22 connections a second, almost all from its code servers.
Each new connection is a forked Postgres backend plus its authentication: ~4 ms of CPU apiece on the 2-core reference
machine, ~3.6 ms of it in Postgres (bench/storage_pool.py); the idle local stack's Postgres used 0.18 of a core.

Only a process that sets POOL_SIZE_VARIABLE keeps a pool, and never a run worker:
- docker-compose.yml sets it for the daemon and the two code servers; run containers never get it (deploy/dagster.yaml
  passes named variables only);
- the local stack (`dagster dev`, local_stack/stack.py) sets it for all its processes, which share one environment. Its
  run workers are the code servers' multiprocessing children (Dagster's default run launcher) and inherit it, so a
  process started by multiprocessing does not pool.
So 25 concurrent runs hold no idle connections either way; the webserver pools already (Dagster's
`optimize_for_webserver`). Connections are checked before each use, so a Postgres restart costs a reconnect, not an
error.

Both images load this module by name from the instance's `storage: custom:` block (deploy/dagster.yaml), as the
local stack's (dagster.yaml) and the tests' instances do (tests/conftest.py): the user-code image has it in the
project's wheel; the Dagster image, which holds no project package, gets this file and the package's empty `__init__`
only (deploy/Dockerfile.dagster). So it imports the standard library and Dagster's public packages alone.
"""

from __future__ import annotations

import multiprocessing
import os
from collections.abc import Mapping

from dagster_postgres import DagsterPostgresStorage
from dagster_postgres.utils import create_pg_engine, get_token_provider_from_config, pg_url_from_config

POOL_SIZE_VARIABLE = "DAGSTER_STORAGE_POOL_SIZE"
MAX_POOL_SIZE = 20
POOL_MAX_OVERFLOW = 8  # more at once in a burst of the daemon's threads, closed after use
POOL_RECYCLE_SECONDS = 3600


def pool_size_from_environment(environ: Mapping[str, str] | None = None) -> int:
    """The pool size POOL_SIZE_VARIABLE asks for, per storage; 0 (no pool) when unset or empty. Anything else but a
    whole number from 0 to MAX_POOL_SIZE stops the process at start-up with an error naming the variable."""
    value = (os.environ if environ is None else environ).get(POOL_SIZE_VARIABLE, "").strip()
    if not value:
        return 0
    if not value.isdigit() or int(value) > MAX_POOL_SIZE:
        raise ValueError(f"{POOL_SIZE_VARIABLE} must be a whole number from 0 to {MAX_POOL_SIZE} (connections kept "
                         f"per storage), not {value!r}")
    return int(value)


def pool_size_for_this_process(environ: Mapping[str, str] | None = None, *,
                               started_by_multiprocessing: bool | None = None) -> int:
    """pool_size_from_environment, except 0 in a process multiprocessing started: the local stack's run workers, which
    a code server starts so and which inherit its environment (the module docstring)."""
    if started_by_multiprocessing is None:
        started_by_multiprocessing = multiprocessing.parent_process() is not None
    size = pool_size_from_environment(environ)
    return 0 if started_by_multiprocessing else size


def _close_engines_on_dispose(storage, *owners) -> None:
    """`storage.dispose()` goes on to close the connection pools of `owners` (storages with an `_engine`)."""
    dispose = storage.dispose

    def dispose_and_close() -> None:
        dispose()
        for owner in owners:
            owner._engine.dispose()  # noqa: SLF001 - the pool this module gave it

    storage.dispose = dispose_and_close


class PooledPostgresStorage(DagsterPostgresStorage):
    """dagster-postgres' storage (same config, tables and behaviour) whose run, event-log and schedule storages each
    keep up to POOL_SIZE_VARIABLE connections open when the process sets it and is no run worker (the module
    docstring); otherwise, DagsterPostgresStorage."""

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.pool_size = pool_size_for_this_process()
        if self.pool_size:
            for storage in (self.run_storage, self.event_log_storage, self.schedule_storage):
                # What dagster-postgres' own optimize_for_webserver does, with a pool for several threads.
                storage._engine.dispose()  # noqa: SLF001 - a NullPool engine: nothing open to lose
                storage._engine = create_pg_engine(  # noqa: SLF001
                    storage.postgres_url, storage._token_provider, isolation_level="AUTOCOMMIT",  # noqa: SLF001
                    pool_size=self.pool_size, max_overflow=POOL_MAX_OVERFLOW, pool_pre_ping=True,
                    pool_recycle=POOL_RECYCLE_SECONDS)
            # A disposed instance closes what its pools hold: DagsterInstance.dispose() reaches the run and event-log
            # storages (not the schedule storage), and dagster-postgres' storages never close their engines, so an
            # instance made and dropped (a test, a short command) would leave its connections open until collected.
            _close_engines_on_dispose(self.run_storage, self.run_storage, self.schedule_storage)
            _close_engines_on_dispose(self.event_log_storage, self.event_log_storage)

    @classmethod
    def from_config_value(cls, inst_data, config_value) -> PooledPostgresStorage:  # dagster-postgres' own, for cls
        return cls(inst_data=inst_data, postgres_url=pg_url_from_config(config_value),
                   should_autocreate_tables=config_value.get("should_autocreate_tables", True),
                   token_provider=get_token_provider_from_config(config_value))
