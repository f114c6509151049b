"""`racing check --in-process`: the console script runs one checkpoint through the same job here (no daemon needed),
recorded in the instance. The queued default is tested in test_queued_cli.py."""

import datetime as dt
import os
import subprocess
import sys
from pathlib import Path

import dagster as dg
import pytest
import sqlalchemy as sa

from orchestration_core.run_outcome import TAG_OUTCOME
from racing_orchestration.tab.sim_engine import SimFeedConfig
from racing_orchestration.tab.sim_feed import SimFeedServer
from tests.racing_orchestration.checkpoint_support import Clock, pick_race, seed_day

DAY = dt.date(2026, 11, 29)
RACING = Path(sys.executable).with_name("racing")


def _racing(args, home: Path, db_url: str, server: SimFeedServer) -> subprocess.CompletedProcess:
    env = {**os.environ, "DAGSTER_HOME": str(home), "RACING_DATABASE_URL": db_url, "TAB_API_BASE_URL": server.base_url}
    return subprocess.run([str(RACING), *args], env=env, capture_output=True, text=True, timeout=240)


@pytest.mark.integration
def test_racing_check_runs_the_checkpoint_and_reports(tmp_path, pg_instance, dagster_database_url, race_db,
                                                       racing_db_url) -> None:
    home = tmp_path / "home"
    home.mkdir()
    (home / "dagster.yaml").write_text(f"storage:\n  postgres:\n    postgres_url: {dagster_database_url}\n")
    clock = Clock(dt.datetime(2026, 11, 28, 17, 0, tzinfo=dt.UTC))
    with SimFeedServer(SimFeedConfig(seed=7), now=clock) as server:
        seed_day(server.feed, race_db, DAY, countries=("NZ",))
        _, race = pick_race(server.feed.day(DAY))
        clock.now = race.scheduled_start - dt.timedelta(hours=3)  # "whatever the time"
        ok = _racing(["check", race.race_id, "--checkpoint", "t15", "--in-process"], home, racing_db_url, server)
        assert ok.returncode == 0, ok.stderr[-2000:]
        assert "success" in ok.stdout
        clock.now = race.jump() + dt.timedelta(minutes=4)  # Interim: --no-wait keeps it provisional
        partial = _racing(["check", race.race_id, "--checkpoint", "post", "--no-wait", "--in-process"], home, racing_db_url, server)
        assert partial.returncode == 1, partial.stderr[-2000:]
        assert "provisional" in partial.stderr
        bad = _racing(["check", "no-such-race", "--checkpoint", "t60", "--in-process"], home, racing_db_url, server)
        assert bad.returncode == 2 and "404" in bad.stderr
    with race_db.connect() as conn:
        snapshot = conn.execute(sa.text("SELECT count(*) FROM odds_snapshots WHERE race_id=:r AND checkpoint='t15'"),
                                {"r": race.race_id}).scalar()
        ledger = conn.execute(sa.text("SELECT count(*) FROM race_checkpoints")).scalar()
    assert snapshot == len(race.runners)
    assert ledger == 0  # manual re-fetches never claim a sensor's checkpoint
    runs = pg_instance.get_runs(dg.RunsFilter(tags={"racing/triggered_by": "manual"}))
    assert sorted(r.job_name for r in runs) == ["post_race_t5", "pre_race_t15", "pre_race_t60"]
    assert {r.tags[TAG_OUTCOME] for r in runs} == {"success", "partial", "failed"}
