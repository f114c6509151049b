"""Settings of the racing location, from the environment (see orchestration_core.settings for the rules; the
race database URL is a platform setting, as the control API reads that database too)."""

from __future__ import annotations

from pydantic import Field

from orchestration_core.settings import SettingsBase
from racing_orchestration.tab.client import DEFAULT_BASE_URL, DEFAULT_USER_AGENT


class RacingSettings(SettingsBase):
    tab_api_base_url: str = Field(DEFAULT_BASE_URL, description="TAB affiliates API (or the simulated feed)")
    tab_from_email: str = Field("", description="`From` header TAB asks partners to send")
    tab_partner_name: str = Field("", description="`X-Partner` header")
    tab_partner_id: str = Field("", description="`X-Partner-ID` header")
    tab_user_agent: str = Field(DEFAULT_USER_AGENT, description="User-Agent sent to TAB")


def racing_settings() -> RacingSettings:
    return RacingSettings()
