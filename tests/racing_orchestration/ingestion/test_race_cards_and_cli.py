import datetime as dt

import dagster as dg
import pytest
import sqlalchemy as sa

from racing_orchestration.cli import main as racing_main
from racing_orchestration.ingestion.race_cards import race_cards

DAY = "2026-11-29"


@pytest.mark.integration
def test_race_cards_partition_materializes_that_day(pg_instance, race_db, tab_client) -> None:
    result = dg.materialize(
        [race_cards],
        partition_key=DAY,
        instance=pg_instance,
        resources={"tab_client": tab_client, "race_db": race_db},
        run_config={"ops": {"race_cards": {"config": {"countries": ["NZ"]}}}},
    )
    assert result.success
    materialization = result.asset_materializations_for_node("race_cards")[0]
    assert materialization.partition == DAY
    with race_db.connect() as conn:
        stored = conn.execute(sa.text("SELECT count(*) FROM meetings WHERE meeting_date = :d AND country = 'NZ'"),
                              {"d": dt.date.fromisoformat(DAY)}).scalar()
    assert materialization.metadata["meetings"].value == stored > 0
    assert "| T | NZ |" in materialization.metadata["combinations"].value


@pytest.mark.integration
def test_racing_scrape_cli_runs_the_job_and_reports(monkeypatch, capsys, tmp_path, dagster_database_url,
                                                    racing_db_url, sim_feed) -> None:
    home = tmp_path / "dagster_home"
    home.mkdir()
    (home / "dagster.yaml").write_text(
        f"storage:\n  postgres:\n    postgres_url: {dagster_database_url}\ntelemetry:\n  enabled: false\n"
    )
    monkeypatch.setenv("DAGSTER_HOME", str(home))
    monkeypatch.setenv("RACING_DATABASE_URL", racing_db_url)
    monkeypatch.setenv("TAB_API_BASE_URL", sim_feed.base_url)
    code = racing_main(["scrape", "--date", DAY, "--countries", "NZ", "--in-process"])
    out = capsys.readouterr().out
    assert code == 0, out
    assert "combinations" in out and "API requests" in out
    run_id = out.strip().splitlines()[-1].split()[1].rstrip(":")
    with dg.DagsterInstance.get() as instance:
        run = instance.get_run_by_id(run_id)
        assert run is not None and run.job_name == "morning_scrape"
        assert run.status == dg.DagsterRunStatus.SUCCESS


@pytest.mark.unit
def test_racing_scrape_without_dagster_home_says_so(monkeypatch, capsys) -> None:
    monkeypatch.delenv("DAGSTER_HOME", raising=False)
    assert racing_main(["scrape"]) == 2
    assert "DAGSTER_HOME" in capsys.readouterr().err
