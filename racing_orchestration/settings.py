"""Settings of the racing location, from the environment (see orchestration_core.settings for the rules; the
race database URL is a platform setting, as the control API reads that database too)."""

from __future__ import annotations

import datetime as dt

from pydantic import Field

from orchestration_core.settings import SettingsBase
from racing_orchestration.tab.client import DEFAULT_BASE_URL, DEFAULT_USER_AGENT

# Launch ahead, fetch on time (README "Checkpoint timing"). The default covers the local launcher on a quiet 2-core
# host with room for load: up to one sensor interval (15 s) plus the daemon loop's jitter (~5 s), the queue's 2 s
# dequeue, and a run worker's start (~5-8 s quiet, 10-20 s loaded). The compose deployment sets 60 s (a container
# start adds ~10-20 s). The ceiling keeps a waiting run clear of the same race's next checkpoint: the post-race
# chain's shortest gap is 5 minutes and the run queue allows one run per race.
DEFAULT_LAUNCH_AHEAD_SECONDS = 45.0
MAX_LAUNCH_AHEAD_SECONDS = 180.0
# Snapshots and results arrive every minute or two on a busy afternoon; the movers and the export are for analysts,
# so one refresh every 5 minutes is up to date enough and costs ~12 runs an hour per day in play, not one per race.
DEFAULT_DATA_REFRESH_SECONDS = 300


class RacingSettings(SettingsBase):
    tab_api_base_url: str = Field(DEFAULT_BASE_URL, description="TAB affiliates API (or the simulated feed)")
    tab_from_email: str = Field("", description="`From` header TAB asks partners to send")
    tab_partner_name: str = Field("", description="`X-Partner` header")
    tab_partner_id: str = Field("", description="`X-Partner-ID` header")
    tab_user_agent: str = Field(DEFAULT_USER_AGENT, description="User-Agent sent to TAB")
    racing_checkpoint_launch_ahead_seconds: float = Field(
        DEFAULT_LAUNCH_AHEAD_SECONDS, ge=0, le=MAX_LAUNCH_AHEAD_SECONDS,
        description="checkpoint runs are requested this long before their target and wait for it before calling TAB "
        "(covers the sensor interval, the run queue and the run worker's start)")
    racing_data_refresh_seconds: int = Field(
        DEFAULT_DATA_REFRESH_SECONDS, ge=30, le=3600,
        description="how often the race_data_automation sensor brings a recent day's market_movers and export up to "
        "date once new snapshots or results arrived (one run per day in play per interval, not one per race)")
    racing_export_dir: str = Field(
        "exports", description="folder the daily Parquet export is written to (one sub-folder per table; relative "
        "paths are from the code location's working directory)")
    racing_export_retention_days: int | None = Field(
        None, ge=1, description="days of export files kept before today (unset: forever); each export run deletes "
        "older day files of its own naming")


def launch_ahead() -> dt.timedelta:
    """`RACING_CHECKPOINT_LAUNCH_AHEAD_SECONDS` as a timedelta (read per sensor tick: cheap, no cache to reset)."""
    return dt.timedelta(seconds=racing_settings().racing_checkpoint_launch_ahead_seconds)


def racing_settings() -> RacingSettings:
    return RacingSettings()
