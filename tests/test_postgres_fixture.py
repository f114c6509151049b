import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import dagster as dg
import pytest
import sqlalchemy as sa


@pytest.mark.integration
def test_fresh_database_is_real_postgres_in_utc(fresh_database_url: str) -> None:
    engine = sa.create_engine(fresh_database_url)
    with engine.connect() as conn:
        assert conn.execute(sa.text("SELECT version()")).scalar().startswith("PostgreSQL")
        assert conn.execute(sa.text("SHOW timezone")).scalar() in ("UTC", "Etc/UTC")
    engine.dispose()


@pytest.mark.integration
def test_pg_instance_stores_runs_in_postgres(pg_instance: dg.DagsterInstance) -> None:
    @dg.op
    def noop() -> int:
        return 1

    @dg.job
    def tiny_job() -> None:
        noop()

    result = tiny_job.execute_in_process(instance=pg_instance)
    assert result.success
    assert type(pg_instance.run_storage).__name__ == "PostgresRunStorage"
    assert pg_instance.get_run_by_id(result.run_id).status == dg.DagsterRunStatus.SUCCESS


@pytest.mark.integration
def test_a_test_session_leaves_nothing_in_the_temp_directory(tmp_path) -> None:
    """A pytest session of its own, starting its own embedded Postgres (no TEST_DATABASE_URL) with the temp directory
    pointed at an empty folder: once it ends, the folder is empty again (pgserver's delete mode removes only the
    server's pgdata, which used to leave one empty `racing-test-pg-*` folder a session)."""
    # Not under pytest's basetemp, which the Postgres user cannot enter when the tests run as root.
    temp_dir = Path(tempfile.mkdtemp(prefix="racing-session-probe-"))
    try:
        env = {name: value for name, value in os.environ.items()
               if name != "TEST_DATABASE_URL" and not name.startswith("COV_CORE_")}
        env["TMPDIR"] = str(temp_dir)
        session = subprocess.run(
            [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", f"--basetemp={tmp_path / 'inner'}",
             f"{Path(__file__).name}::test_fresh_database_is_real_postgres_in_utc"],
            cwd=Path(__file__).parent, env=env, capture_output=True, text=True, timeout=300)
        assert session.returncode == 0, session.stdout + session.stderr
        assert "1 passed" in session.stdout
        # pgserver's lock file is shared by every server on the host (the folder stands in for /tmp), not a leftover.
        assert sorted(path.name for path in temp_dir.iterdir()) == [".lockfile"]
    finally:
        shutil.rmtree(temp_dir, ignore_errors=True)
