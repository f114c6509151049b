"""Declarative automation of the derived assets: a recent racing day's `market_movers` and `race_day_export` are
brought up to date by the `race_data_automation` sensor as that day's cards, snapshots and results arrive, no click.

The condition: the partition is one of the recent racing days (tomorrow, today or yesterday: a late meeting's results
arrive after midnight), some upstream partition of that day was updated since the partition was last requested
(`dep_updated_since_last_request`), and nothing upstream or of its own is in progress. The sensor evaluates it every
RACING_DATA_REFRESH_SECONDS (5 minutes by default), so a busy afternoon, a snapshot or a result every minute or two,
costs one run per day in play per interval, not one per race; whatever arrived in between is in that run. Older days
are brought up to date on demand (UI backfill, `dagster asset materialize --partition-range`).

The sensor is evaluated by the daemon's asset daemon (`dagster dev` under `make run`, `dagster-daemon run` in the
compose deployment), which runs by default (`auto_materialize.use_sensors`); tests/deploy checks both instances.
"""

from __future__ import annotations

import datetime as dt

import dagster as dg

from orchestration_core.run_outcome import KIND_RACING, TAG_KIND
from racing_orchestration.race_data.catalog import MARKET_MOVERS, RACE_DAY_EXPORT
from racing_orchestration.settings import racing_settings

# The latest time window is tomorrow (end_offset=1); three days back from its end covers tomorrow, today, yesterday.
RECENT_DAYS = dt.timedelta(days=3)
AUTOMATED_ASSETS = (MARKET_MOVERS, RACE_DAY_EXPORT)


def recent_day_data_arrived() -> dg.AutomationCondition:
    """Request a recent day's partition once new upstream data of that day has arrived (see the module's docstring)."""
    return (
        dg.AutomationCondition.in_latest_time_window(RECENT_DAYS).with_label("a recent racing day")
        & dep_updated_since_last_request().with_label(
            "its cards, snapshots or results arrived since it was last requested")
        & ~dg.AutomationCondition.any_deps_in_progress()
        & ~dg.AutomationCondition.in_progress()
    ).with_label("recent_day_data_arrived")


def dep_updated_since_last_request() -> dg.AutomationCondition:
    """True from an evaluation that sees an upstream partition of the day updated until the day is next requested.

    Not Dagster's `any_deps_updated().since_last_handled()`: when an evaluation sees both the trigger and the reset,
    `since` keeps the trigger only if both carry times and the trigger's is later, and those two carry none (each is
    an and/or of conditions). An update landing after the evaluation that requested the day (a snapshot stored while
    the requested run writes the export) is seen together with that request by the next evaluation, so the reset
    won and the update was lost until another one arrived: for a day's last snapshot or result, for good
    (tests/racing_orchestration/race_data/test_automation.py). Here the trigger carries the update's time and the
    reset the request's, so an update after the request wins. Left out on purpose: a day materialized by hand does
    not reset it (that day is requested once more), and a dep updated by a run that also materialized the day still
    counts (no run here does both).
    """
    return dg.AutomationCondition.any_deps_match(dg.AutomationCondition.newly_updated()).since(
        dg.AutomationCondition.newly_requested())


def race_data_automation() -> dg.AutomationConditionSensorDefinition:
    interval = racing_settings().racing_data_refresh_seconds
    return dg.AutomationConditionSensorDefinition(
        "race_data_automation",
        target=dg.AssetSelection.assets(*AUTOMATED_ASSETS),
        default_status=dg.DefaultSensorStatus.RUNNING,
        minimum_interval_seconds=interval,
        run_tags={TAG_KIND: KIND_RACING},
        description=f"Every {interval} s: brings market_movers and race_day_export of tomorrow, today and yesterday up "
        "to date when that day's cards, odds snapshots or results arrived since they were last requested.",
    )
