"""The Dagster instance's storage: dagster-postgres' own, with a connection pool in the daemon.

dagster-postgres opens a new connection for every storage call (SQLAlchemy's NullPool), so that short-lived processes
(run workers, sensor evaluations in a code server) hold none open. The daemon is the opposite: one process for the life
of the deployment, whose threads (sensors, schedules, the run queue every 2 s, run monitoring, the event-log consumer)
make storage calls all the time. On the compose deployment that was about 16 new connections a second
(pg_stat_database.sessions), each a forked Postgres backend plus its authentication: ~4 ms of CPU apiece on the 2-core
reference machine, ~3.6 ms of it in Postgres (bench/storage_pool.py).

Only a process that sets POOL_SIZE_VARIABLE keeps a pool: docker-compose.yml sets it for the daemon alone. The local
stack's instance (dagster.yaml) names dagster-postgres' own storage, so none of its processes pools (BENCHMARKS.md
"Test suite": what that costs). Run containers never get it (deploy/dagster.yaml passes named variables
only), so 25 concurrent runs hold no idle connections; the webserver pools already (Dagster's
`optimize_for_webserver`). Connections are checked before each use, so a Postgres restart costs a reconnect, not an
error.

Both images load this module by name from the instance's `storage: custom:` block (deploy/dagster.yaml), as the
tests' instances do (tests/conftest.py): the user-code image has it in the project's wheel; the Dagster image, which
holds no project package, gets this file and the package's empty `__init__` only (deploy/Dockerfile.dagster). So it
imports Dagster's public packages alone.
"""

from __future__ import annotations

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
    keep up to POOL_SIZE_VARIABLE connections open when the process sets it; without it, DagsterPostgresStorage."""

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.pool_size = pool_size_from_environment()
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
