"""The morning scrape against a faulty feed: the real `morning_scrape` job (threadpool executor, launched with
execute_job), real Postgres, the simulated feed on a real socket injecting 5xx, timeouts, malformed bodies and 429s at
seeded rates. After its retries the scrape must hold 100% of the simulated days' meetings and races, with no
duplicate by any natural key, and the `scrapes` audit must show the faults (so the test fails if none were injected).

Only the combination retry delay is shortened (run config); its real 30 minutes is asserted elsewhere. The client
keeps its production retry count (3 attempts); its backoff and the 429 Retry-After cap are shortened, and its timeout
is shorter than the feed's hold on a "timeout" fault so the client really times out.

`pytest -s` prints the measured figures (RELIABILITY.md quotes them).
"""

import datetime as dt

import dagster as dg
import pytest
import sqlalchemy as sa

from racing_orchestration.ingestion.jobs import morning_scrape
from racing_orchestration.race_db.resource import RaceDatabase
from racing_orchestration.tab.client import TabClient
from racing_orchestration.tab.sim_engine import SimFeedConfig
from racing_orchestration.tab.sim_feed import SimFeedServer

FIRST_DAY = dt.date(2026, 11, 29)
DAYS = [FIRST_DAY + dt.timedelta(days=n) for n in range(7)]  # 7 days x 3 categories x 2 countries = 42 combinations
COUNTRIES = ("NZ", "AUS")
# The fault mix (10-20% 5xx, 5-10% timeouts, 2-5% malformed, 5-10% 429): the upper end of each range.
FAULTS = {"error_5xx_rate": 0.20, "timeout_rate": 0.10, "malformed_rate": 0.05, "rate_limit_rate": 0.10}
CLIENT_TIMEOUT_SECONDS = 3.0
FEED_TIMEOUT_HOLD_SECONDS = 4.0


def faulty_feed_scrape_job(base_url: str, db_url: str) -> dg.JobDefinition:
    """morning_scrape with its resources bound to the test's feed and database (execute_job reconstructs it)."""
    client = TabClient(base_url=base_url, timeout_seconds=CLIENT_TIMEOUT_SECONDS, retry_backoff_seconds=0.01,
                       retry_after_cap_seconds=0.05)
    return dg.Definitions(jobs=[morning_scrape], resources={"tab_client": client, "race_db": RaceDatabase(url=db_url)}
                          ).resolve_job_def("morning_scrape")


# How the audit (`scrapes.error`) names each kind of fault the feed injects.
AUDIT_TEXT = {"5xx": "HTTP 503", "timeout": "timeout after", "malformed": "not valid JSON", "429": "HTTP 429"}

# (table, natural key) of every row the morning scrape writes.
NATURAL_KEYS = [
    ("meetings", "meeting_id"),
    ("meetings", "meeting_date, country, category, name"),
    ("races", "race_id"),
    ("races", "meeting_id, race_number"),
    ("scrapes", "call_key"),
]


def _figures(race_db: RaceDatabase, expected_meetings: set[str], expected_races: set[str]) -> dict:
    with race_db.connect() as conn:
        meetings = set(conn.execute(sa.text("SELECT meeting_id FROM meetings")).scalars())
        races = set(conn.execute(sa.text("SELECT race_id FROM races")).scalars())
        duplicates = {f"{table}({key})": conn.execute(sa.text(
            f"SELECT coalesce(sum(n - 1), 0)::int FROM (SELECT count(*) AS n FROM {table} GROUP BY {key}) AS g")).scalar()
            for table, key in NATURAL_KEYS}
        calls = conn.execute(sa.text("SELECT outcome, status_code, attempts, error FROM scrapes")).all()
    return {
        "meetings": (len(meetings & expected_meetings), len(expected_meetings)),
        "races": (len(races & expected_races), len(expected_races)),
        "unexpected": len(meetings - expected_meetings) + len(races - expected_races),
        "duplicates": duplicates,
        "calls": len(calls),
        "calls_retried_in_client": sum(c.attempts > 1 for c in calls),
        "calls_failed": sum(c.outcome == "error" for c in calls),
        # Every attempt's problem is on its call's audit row (recovered or not): count them per kind.
        "audited_faults": {kind: sum((c.error or "").count(text) for c in calls) for kind, text in AUDIT_TEXT.items()},
    }


@pytest.mark.integration
def test_fault_injected_morning_scrape_reaches_every_meeting_and_race_once(pg_instance, race_db) -> None:
    config = SimFeedConfig(seed=15, timeout_fault_seconds=FEED_TIMEOUT_HOLD_SECONDS, **FAULTS)
    with SimFeedServer(config) as server:
        expected = [m for day in DAYS for m in server.feed.day(day) if m.country in COUNTRIES]
        expected_meetings = {m.meeting_id for m in expected}
        expected_races = {r.race_id for m in expected for r in m.races}
        job = dg.build_reconstructable_job(__name__, "faulty_feed_scrape_job",
                                           reconstructable_args=(server.base_url, race_db.url))
        run_config = {"ops": {
            "plan_scrape_combinations": {"config": {"dates": [d.isoformat() for d in DAYS], "countries": list(COUNTRIES)}},
            "scrape_combination": {"config": {"retry_delay_seconds": 0.05}},  # max_retries stays the real 3
        }}
        with dg.execute_job(job, instance=pg_instance, run_config=run_config, raise_on_error=False) as result:
            success = result.success
            step_retries = sum(e.event_type_value == "STEP_UP_FOR_RETRY" for e in result.all_events)
            run = pg_instance.get_run_by_id(result.run_id)
        injected = server.stats()["faults"]
        requests = server.stats()["total"]

    figures = _figures(race_db, expected_meetings, expected_races)
    print(f"\nfault-injected morning scrape: {requests} API requests, faults injected {injected}, "
          f"{step_retries} step retries; {figures}")
    # The faults happened, each kind, and the audit shows them.
    assert set(injected) == {"5xx", "timeout", "malformed", "429"} and all(injected.values()), injected
    audited = figures["audited_faults"]
    assert {k: audited[k] for k in ("5xx", "malformed", "429")} == {k: injected[k] for k in ("5xx", "malformed", "429")}
    assert audited["timeout"] >= injected["timeout"]  # a loaded machine may add a genuine client timeout
    assert figures["calls_retried_in_client"] > 0 and figures["calls_failed"] > 0 and step_retries > 0
    # ...and still everything, once.
    assert success and run.tags["racing/outcome"] == "success", run.tags.get("racing/error")
    assert figures["meetings"] == (len(expected_meetings), len(expected_meetings))
    assert figures["races"] == (len(expected_races), len(expected_races))
    assert figures["unexpected"] == 0
    assert figures["duplicates"] == dict.fromkeys(figures["duplicates"], 0)
