"""End to end: the real `dagster-daemon` ticks the T-60 sensor, which launches a real run that stores odds."""

import datetime as dt
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import dagster as dg
import pytest
import sqlalchemy as sa

from racing_orchestration.tab.sim_engine import SimFeedConfig
from racing_orchestration.tab.sim_feed import SimFeedServer
from tests.racing_orchestration.checkpoint_support import seed_day

REPO = Path(__file__).resolve().parents[3]
DAEMON = Path(sys.executable).with_name("dagster-daemon")


@pytest.mark.integration
@pytest.mark.slow
def test_daemon_sensor_launches_a_run_that_stores_a_snapshot(tmp_path, pg_instance, dagster_database_url, race_db,
                                                             racing_db_url) -> None:
    home = tmp_path / "home"
    home.mkdir()
    (home / "dagster.yaml").write_text(
        f"storage:\n  postgres:\n    postgres_url: {dagster_database_url}\n"
        "run_coordinator:\n  module: dagster._core.run_coordinator\n  class: QueuedRunCoordinator\n"
        "  config:\n    dequeue_interval_seconds: 2\n"
        "sensors:\n  use_threads: true\n  num_workers: 2\n"
    )
    workspace = tmp_path / "workspace.yaml"
    workspace.write_text("load_from:\n  - python_module:\n      module_name: racing_orchestration.definitions\n"
                         f"      working_directory: {REPO}\n")
    # Dense mode: the first race's T-60 falls due ~20 s from now, the next ones a minute apart.
    config = SimFeedConfig(seed=3, dense_every_minutes=1, dense_races=5, dense_lead_minutes=60 + 20 / 60)
    with SimFeedServer(config) as server:
        dense_day = server.feed.now().astimezone(dt.timezone(dt.timedelta(hours=13))).date()
        seeded = sum(seed_day(server.feed, race_db, day, countries=("NZ", "AUS"))
                     for day in {dense_day, server.feed._dense[0].date})  # noqa: SLF001 - the dense card's date
        assert seeded == 5
        first = min(r.scheduled_start for m in server.feed._dense for r in m.races)  # noqa: SLF001
        env = {**os.environ, "DAGSTER_HOME": str(home), "RACING_DATABASE_URL": racing_db_url,
               "TAB_API_BASE_URL": server.base_url}
        log = (tmp_path / "daemon.log").open("w")
        daemon = subprocess.Popen([str(DAEMON), "run", "-w", str(workspace)], cwd=REPO, env=env, stdout=log,
                                  stderr=subprocess.STDOUT, start_new_session=True)
        try:
            deadline = time.monotonic() + 240
            rows = 0
            while time.monotonic() < deadline and rows == 0:
                time.sleep(3)
                assert daemon.poll() is None, (tmp_path / "daemon.log").read_text()[-3000:]
                with race_db.connect() as conn:
                    rows = conn.execute(sa.text("SELECT count(*) FROM odds_snapshots WHERE checkpoint='t60'")).scalar()
            assert rows > 0, (tmp_path / "daemon.log").read_text()[-3000:]
        finally:
            os.killpg(daemon.pid, signal.SIGTERM)
            daemon.wait(timeout=60)
    runs = pg_instance.get_runs(dg.RunsFilter(job_name="pre_race_t60"))
    assert runs and runs[-1].tags["dagster/sensor_name"] == "pre_race_t60_sensor"
    first_run = runs[-1]
    assert first_run.tags["racing/checkpoint"] == "t60" and first_run.tags["racing/race_id"]
    assert first_run.tags["dagster/priority"] == "110"  # the job's tag reaches the sensor's run (the queue reads it)
    assert dt.datetime.fromisoformat(first_run.tags["racing/scheduled_for"]) == first - dt.timedelta(minutes=60)
    with race_db.connect() as conn:
        ledger = conn.execute(sa.text("SELECT state, run_id FROM race_checkpoints WHERE checkpoint='t60' "
                                      "AND run_id IS NOT NULL")).all()
    assert any(run_id == first_run.run_id for _, run_id in ledger)
    assert server.stats()["requests"].get("/events/{id}", 0) >= 1
