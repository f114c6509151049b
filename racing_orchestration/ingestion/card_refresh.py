"""`card_refresh`: today's card fetched again every 30 minutes from 07:00 until the day's last race has started.

The checkpoint sensors only know the races in the race database. A race TAB adds after the 06:00 scrape, or a start
time it moves, reaches the database here (the upsert is idempotent and records start-time changes), so the sensors
request its checkpoints at the right times. Start times moved in the last hour before a race are also caught by its
own T-60 / T-15 runs, which store the event they fetch.

Cost: one /meetings call per (category, country) of today (6 with the defaults) per refresh; no retries (the next
refresh is the retry), so at most 34 refreshes (204 calls) a day, fewer once the last race has started.
"""

from __future__ import annotations

import datetime as dt

import dagster as dg
import sqlalchemy as sa

from orchestration_core.run_outcome import (
    ALERT_ON_CHANGE,
    EXPECTED_INTERVAL_METADATA,
    KIND_RACING,
    TAG_ALERTS,
    TAG_KIND,
)
from orchestration_core.settings import racing_timezone
from racing_orchestration.ingestion.combinations import scrape_days
from racing_orchestration.ingestion.jobs import (
    plan_scrape_combinations,
    scrape_combination,
    summarize_scrape,
)
from racing_orchestration.race_db import schema
from racing_orchestration.race_db.resource import RaceDatabase
from racing_orchestration.threaded_executor import threadpool_executor

CARD_REFRESH_CRON = "*/30 7-23 * * *"  # racing time; the 06:00 morning scrape covers the morning itself
TAG_REFRESH_DAY = "racing/refresh_day"


def card_refresh_run_config(day: dt.date) -> dict:
    """Today's combinations only, each fetched once (no 30-minute retry waits: the next refresh comes first)."""
    return {"ops": {"plan_scrape_combinations": {"config": {"dates": [day.isoformat()], "days_ahead": 0}},
                    "scrape_combination": {"config": {"max_retries": 0}}}}


@dg.job(
    executor_def=threadpool_executor,
    # Every 30 minutes through a TAB outage would be 2 alerts an hour: alert when its outcome changes instead.
    tags={TAG_KIND: KIND_RACING, TAG_ALERTS: ALERT_ON_CHANGE},
    # Launched by hand without config it refreshes today, once per combination, as the schedule does.
    config={"ops": {"plan_scrape_combinations": {"config": {"days_ahead": 0}},
                    "scrape_combination": {"config": {"max_retries": 0}}}},
    description="Today's meetings and races fetched again and upserted, so races added or re-timed after the "
    "morning scrape get their checkpoints.",
)
def card_refresh():
    summarize_scrape(plan_scrape_combinations().map(scrape_combination).collect())


def last_start_of_day(conn: sa.Connection, day: dt.date) -> dt.datetime | None:
    """The latest start time stored for a race of `day`'s meetings (None when none is stored)."""
    races, meetings = schema.races, schema.meetings
    query = (sa.select(sa.func.max(races.c.start_time))
             .select_from(races.join(meetings, races.c.meeting_id == meetings.c.meeting_id))
             .where(meetings.c.meeting_date == day))
    return conn.execute(query).scalar()


def refresh_skip_reason(last_start: dt.datetime | None, now: dt.datetime) -> str | None:
    """Why a refresh at `now` is not worth its calls, or None to refresh.

    With no race stored for today the card is still fetched: TAB may publish it late, or the morning scrape failed.
    """
    if last_start is not None and last_start <= now:
        return (f"today's last stored race started at {last_start.astimezone(dt.UTC):%H:%M} UTC: "
                "nothing left to refresh until tomorrow's morning scrape")
    return None


@dg.schedule(
    cron_schedule=CARD_REFRESH_CRON,
    job=card_refresh,
    execution_timezone=racing_timezone(),
    default_status=dg.DefaultScheduleStatus.RUNNING,
    description="Refresh today's card every 30 minutes from 07:00 racing time until the day's last race has started.",
    # Its ticks skip once the day's last race has started (and all day on a day without races), so its cron says
    # nothing about the gap between successes: JobOverdue (deploy/prometheus/alerts.yml) allows two days.
    metadata={EXPECTED_INTERVAL_METADATA: 2 * 86400},
)
def card_refresh_schedule(context: dg.ScheduleEvaluationContext, race_db: RaceDatabase):
    now = context.scheduled_execution_time or dt.datetime.now(dt.UTC)
    today = scrape_days(now, racing_timezone(), days_ahead=0)[0]
    try:
        with race_db.connect() as conn:
            last_start = last_start_of_day(conn, today)
    finally:
        race_db.dispose()  # a tick every 30 minutes: no pool to keep between them
    reason = refresh_skip_reason(last_start, now)
    if reason:
        return dg.SkipReason(reason)
    # One run per tick (the key names the tick), so a daemon catching up never launches the same refresh twice.
    return dg.RunRequest(run_key=f"card_refresh:{now.astimezone(dt.UTC):%Y%m%dT%H%M}",
                         run_config=card_refresh_run_config(today), tags={TAG_REFRESH_DAY: today.isoformat()})
