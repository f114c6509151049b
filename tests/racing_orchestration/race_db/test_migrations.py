"""Race database migrations against a real, empty Postgres: upgrade, revision, drift, and the schema-behind check."""

from __future__ import annotations

import subprocess
import sys

import pytest
import sqlalchemy as sa
from alembic import command
from alembic.autogenerate import compare_metadata
from alembic.runtime.migration import MigrationContext

from racing_orchestration.race_db.migrations import (
    HEAD_REVISION,
    MIGRATIONS_DIR,
    SchemaBehindError,
    alembic_config,
    assert_schema_current,
    current_revision,
    head_revision,
    upgrade,
)
from racing_orchestration.race_db.schema import metadata

pytestmark = pytest.mark.integration

EXPECTED_TABLES = {
    "meetings", "races", "runners", "odds_snapshots", "results", "dividends", "scrapes",
    "race_checkpoints", "market_movers",
}  # fmt: skip


def test_upgrade_from_empty_creates_every_table_and_reaches_head(fresh_database_url: str) -> None:
    assert current_revision(fresh_database_url) is None
    assert upgrade(fresh_database_url) == head_revision()
    assert current_revision(fresh_database_url) == head_revision()
    engine = sa.create_engine(fresh_database_url)
    try:
        tables = set(sa.inspect(engine).get_table_names())
        assert EXPECTED_TABLES <= tables
        indexes = {ix["name"] for ix in sa.inspect(engine).get_indexes("races")}
        assert {"ix_races_start_time", "ix_races_status_start_time"} <= indexes
    finally:
        engine.dispose()


def test_upgrade_twice_is_a_no_op(fresh_database_url: str) -> None:
    upgrade(fresh_database_url)
    assert upgrade(fresh_database_url) == head_revision()


def test_migrations_match_schema_module(fresh_database_url: str) -> None:
    # Autogenerate finds no difference between the migrated database and schema.py: nobody forgot a migration.
    upgrade(fresh_database_url)
    engine = sa.create_engine(fresh_database_url)
    try:
        with engine.connect() as conn:
            diff = compare_metadata(MigrationContext.configure(conn, opts={"compare_type": True}), metadata)
    finally:
        engine.dispose()
    assert diff == []


def test_schema_behind_on_empty_database_names_the_upgrade_command(fresh_database_url: str) -> None:
    with pytest.raises(SchemaBehindError) as excinfo:
        assert_schema_current(fresh_database_url)
    message = str(excinfo.value)
    assert "racing db upgrade" in message
    assert f"code expects {head_revision()}" in message
    assert "none (empty database)" in message


def test_schema_behind_after_downgrade_and_at_unknown_revision(fresh_database_url: str) -> None:
    upgrade(fresh_database_url)
    assert_schema_current(fresh_database_url)  # at head: no error
    command.downgrade(alembic_config(fresh_database_url), "base")
    assert current_revision(fresh_database_url) is None
    with pytest.raises(SchemaBehindError, match="racing db upgrade"):
        assert_schema_current(fresh_database_url)
    # A revision this code does not know (e.g. written by newer code) is refused too, and named.
    upgrade(fresh_database_url)
    engine = sa.create_engine(fresh_database_url)
    try:
        with engine.begin() as conn:
            conn.execute(sa.text("UPDATE alembic_version SET version_num = 'ffff'"))
        with pytest.raises(SchemaBehindError, match="at revision ffff, code expects"):
            assert_schema_current(engine)
    finally:
        engine.dispose()


def test_the_revision_the_code_expects_is_the_newest_migration() -> None:
    from alembic.script import ScriptDirectory

    # A new migration that leaves HEAD_REVISION behind would let a database one revision short pass as current.
    assert ScriptDirectory(str(MIGRATIONS_DIR)).get_current_head() == HEAD_REVISION == head_revision()


def test_a_database_one_revision_short_is_behind(fresh_database_url: str) -> None:
    upgrade(fresh_database_url, "0002")
    assert current_revision(fresh_database_url) == "0002"
    with pytest.raises(SchemaBehindError, match="at revision 0002, code expects 0003: run `racing db upgrade`"):
        assert_schema_current(fresh_database_url)


def test_a_racing_process_checks_the_schema_without_loading_alembic(fresh_database_url: str) -> None:
    upgrade(fresh_database_url)
    # A fresh interpreter, as a code server or run worker starts: the location, then the resource's and the sensors'
    # schema checks on a current database.
    probe = ("import sys; import racing_orchestration.definitions; "
             "from racing_orchestration.race_db.resource import RaceDatabase; "
             "from racing_orchestration.checkpoints.sensors import sensor_engine; "
             f"database = RaceDatabase(url={fresh_database_url!r}); database.engine(); sensor_engine(database); "
             "print(sorted({m.split('.')[0] for m in sys.modules} & {'alembic', 'mako'}))")
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[]"
