"""Settings shared by the whole platform, and the base every package's settings object derives from.

Each package has one typed settings object read from the environment (pydantic-settings): this module's
`PlatformSettings`, `racing_orchestration.settings.RacingSettings`, `maintenance_jobs.settings.MaintenanceSettings`
and `control_api.config.ApiSettings`. Every environment variable the code reads is a field of exactly one of them
(tests/test_settings.py checks that, and that README's table lists the same names). Secrets are `SecretStr` here,
and Dagster resources still receive them through `dg.EnvVar`, so their values never reach the UI.
"""

from __future__ import annotations

from pydantic import Field, SecretStr, field_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

DEFAULT_RACING_TIMEZONE = "Pacific/Auckland"
DEFAULT_DAGSTER_UI_URL = "http://127.0.0.1:3000"
# Successful runs are kept this long (the nightly cleanup's default `older_than_days`). Failed, canceled and partial
# runs document problems, so their own retention may not be shorter.
SUCCESS_RETENTION_DAYS = 14

# How long the gRPC server that `dagster code-server start` runs (`make run`'s `dagster dev` starts one per location)
# waits without a heartbeat from that proxy before it shuts down: Dagster's option `--heartbeat-ttl` (the variable
# DAGSTER_GRPC_PROXY_HEARTBEAT_TTL_SECONDS under `dagster dev`). Dagster's 30 s ended servers that were only starved of
# CPU, or whose gRPC threads all waited on a stopped Postgres, and the proxy never starts another
# (dagster-io/dagster#24050): the location stayed unreachable. The proxy sends a heartbeat every second, so ten
# minutes without one is a proxy that is gone; then `make run`'s process group ends with it anyway. The compose and
# Kubernetes forms run `dagster api grpc` as the container's process, with no proxy and no heartbeat (tests check it).
CODE_SERVER_HEARTBEAT_TTL_SECONDS = 600


class SettingsBase(BaseSettings):
    """Field names are the variables' names (case-insensitive); an empty value counts as unset, as compose passes
    every variable of `.env` through, empty when unused."""

    model_config = SettingsConfigDict(extra="ignore", env_ignore_empty=True, frozen=True, populate_by_name=True)


class PlatformSettings(SettingsBase):
    dagster_home: str | None = Field(None, description="folder holding the Dagster instance's dagster.yaml")
    dagster_postgres_url: SecretStr | None = Field(
        None, description="Dagster run/event/schedule storage (read by dagster.yaml)")
    racing_database_url: SecretStr | None = Field(None, description="the race database")
    maintenance_database_url: SecretStr | None = Field(None, description="the maintenance task registry")
    # Read by the nightly cleanup job (racing location), which prunes the maintenance execution history.
    maintenance_history_days: int | None = Field(
        None, ge=1, description="days the maintenance execution history is kept (unset: forever); pruned nightly")
    run_retention_failed_days: int | None = Field(
        None, description="days failed, canceled and partial runs (and the successes that recovered them) are kept "
        f"(unset: forever, the audit trail); at least the success retention, {SUCCESS_RETENTION_DAYS}")
    racing_timezone: str = Field(DEFAULT_RACING_TIMEZONE, description="timezone of the racing day and its schedules")
    alert_webhook_url: SecretStr | None = Field(None, description="Slack-compatible webhook for run alerts")
    dagster_ui_url: str = Field(DEFAULT_DAGSTER_UI_URL, description="the Dagster UI as users reach it")

    @field_validator("run_retention_failed_days")
    @classmethod
    def _not_shorter_than_success_retention(cls, days: int | None) -> int | None:
        if days is not None and days < SUCCESS_RETENTION_DAYS:
            raise ValueError(
                f"RUN_RETENTION_FAILED_DAYS={days} is shorter than the {SUCCESS_RETENTION_DAYS} days successful runs "
                f"are kept: failed runs are the audit trail; set at least {SUCCESS_RETENTION_DAYS}, or unset it to "
                "keep them forever")
        return days


def platform_settings() -> PlatformSettings:
    return PlatformSettings()


def secret(value: SecretStr | None) -> str | None:
    return value.get_secret_value() if value is not None else None


def racing_timezone() -> str:
    """IANA timezone of the racing day and of the platform's schedules (`RACING_TIMEZONE`)."""
    return platform_settings().racing_timezone
