"""`RaceDatabase` resource and `racing db` CLI against real Postgres: the schema-behind check names the command."""

from __future__ import annotations

import dagster as dg
import pytest
import sqlalchemy as sa

from racing_orchestration.cli import main
from racing_orchestration.race_db.migrations import SchemaBehindError, current_revision, head_revision
from racing_orchestration.race_db.resource import RaceDatabase

pytestmark = pytest.mark.integration


def test_resource_on_empty_database_fails_naming_the_upgrade_command(fresh_database_url: str) -> None:
    database = RaceDatabase(url=fresh_database_url)
    with pytest.raises(SchemaBehindError, match="run `racing db upgrade`"):
        with database.begin():
            pass
    assert database._engine is None  # nothing half-initialised is cached; the next use checks again


def test_cli_upgrade_then_resource_works(fresh_database_url: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["db", "current", "--url", fresh_database_url]) == 1
    out, err = capsys.readouterr()
    assert out.strip() == "none" and "racing db upgrade" in err

    assert main(["db", "upgrade", "--url", fresh_database_url]) == 0
    assert f"upgraded from empty to {head_revision()}" in capsys.readouterr().out
    assert main(["db", "upgrade", "--url", fresh_database_url]) == 0
    assert f"already at revision {head_revision()}" in capsys.readouterr().out
    assert main(["db", "current", "--url", fresh_database_url]) == 0
    assert capsys.readouterr().out.strip() == head_revision()
    assert current_revision(fresh_database_url) == head_revision()

    database = RaceDatabase(url=fresh_database_url)
    with database.begin() as conn:
        conn.execute(sa.text("INSERT INTO scrapes (call_key, endpoint, params, outcome, duration_ms, attempts, items,"
                             " started_at) VALUES ('k', '/meetings', '{}', 'ok', 1, 1, 0, now())"))  # fmt: skip
    with database.connect() as conn:
        assert conn.execute(sa.text("SELECT count(*) FROM scrapes")).scalar_one() == 1
    assert database.engine() is database.engine()  # one engine (pool) per resource instance
    database.dispose()


def test_cli_reads_the_url_from_the_environment(
    fresh_database_url: str, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.delenv("RACING_DATABASE_URL", raising=False)
    assert main(["db", "upgrade"]) == 2
    assert "racing db upgrade: no database URL: pass --url or set RACING_DATABASE_URL" in capsys.readouterr().err
    monkeypatch.setenv("RACING_DATABASE_URL", fresh_database_url)
    assert main(["db", "upgrade"]) == 0
    assert current_revision(fresh_database_url) == head_revision()


def test_resource_inside_an_op_with_env_var(fresh_database_url: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("RACING_DATABASE_URL", fresh_database_url)
    main(["db", "upgrade"])

    @dg.op
    def count_races(race_db: RaceDatabase) -> int:
        with race_db.connect() as conn:
            return conn.execute(sa.text("SELECT count(*) FROM races")).scalar_one()

    @dg.job(resource_defs={"race_db": RaceDatabase(url=dg.EnvVar("RACING_DATABASE_URL"))})
    def count_job() -> None:
        count_races()

    result = count_job.execute_in_process()
    assert result.success and result.output_for_node("count_races") == 0
