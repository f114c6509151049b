"""Settings of the control API, read from the environment (and the command line) once at start-up."""

from __future__ import annotations

import os
import stat
from pathlib import Path
from typing import Annotated, Any

from pydantic import (
    AliasChoices,
    Field,
    ValidationError,
    field_validator,
    model_validator,
)
from pydantic_settings import NoDecode

from control_api.docs_page import DOCS_ASSET_PATHS
from platform_monitoring.liveness import DEFAULT_HEARTBEAT_MAX_AGE_SECONDS, CodeServer, parse_code_servers
from orchestration_core.settings import SettingsBase, platform_settings, secret

DEFAULT_PUBLIC_PATHS = (
    frozenset({"/health", "/docs", "/docs/oauth2-redirect", "/openapi.json", "/metrics"}) | DOCS_ASSET_PATHS
)
DEFAULT_CACHE_SECONDS = 1.0
# /metrics is public (Prometheus scrapes without a key): one rendering serves every scrape for this long, so
# anonymous scrapers cannot load the databases or the API's threads.
DEFAULT_METRICS_CACHE_SECONDS = 5.0
# Set by `maintenance-api --workers N` for its worker processes only: carries --insecure-dev to them.
INSECURE_DEV_ENV = "_MAINTENANCE_API_INSECURE_DEV"


class ApiConfigError(Exception):
    """The API cannot start with this configuration (e.g. no API key and no --insecure-dev)."""


def _env(name: str, env: str) -> AliasChoices:
    return AliasChoices(name, env)


class ApiSettings(SettingsBase):
    """What `create_app` needs, from the environment."""

    # The databases, Dagster's home and the UI address are platform settings (PlatformSettings); given here only by
    # tests.
    registry_url: str | None = Field(None, validation_alias=AliasChoices("registry_url"), exclude=True)
    # Dagster's storage database (DAGSTER_POSTGRES_URL), read by SQL: the API does not open a Dagster instance.
    dagster_database_url: str | None = Field(None, validation_alias=AliasChoices("dagster_database_url"),
                                             exclude=True)
    # Where the instance's dagster.yaml is (DAGSTER_HOME): which daemons must beat, the run queue's limits.
    dagster_home: str | None = Field(None, validation_alias=AliasChoices("dagster_home"), exclude=True)
    api_key: str | None = Field(None, validation_alias=_env("api_key", "SCHEDULER_API_KEY"),
                                description="bearer key of the API")
    api_key_file: str | None = Field(None, validation_alias=_env("api_key_file", "SCHEDULER_API_KEY_FILE"),
                                     description="file holding the bearer key (wins over SCHEDULER_API_KEY)")
    insecure_dev: bool = Field(False, validation_alias=_env("insecure_dev", INSECURE_DEV_ENV),
                               description="internal: carries --insecure-dev to worker processes")
    racing_database_url: str | None = Field(None, validation_alias=AliasChoices("racing_database_url"), exclude=True)
    # A comma-separated list in the environment, not JSON (NoDecode hands the raw string to the validator).
    public_paths: Annotated[frozenset[str], NoDecode] = Field(DEFAULT_PUBLIC_PATHS,
                                         validation_alias=_env("public_paths", "SCHEDULER_API_PUBLIC_PATHS"),
                                         description="paths served without a key, comma-separated")
    dagster_ui_url: str | None = Field(None, validation_alias=AliasChoices("dagster_ui_url"), exclude=True)
    # Where this process reaches the webserver's GraphQL API to launch runs (manual triggers); None: dagster_ui_url.
    # In compose the two differ: users reach 127.0.0.1:3000, the API reaches the `webserver` service.
    dagster_webserver_url: str | None = Field(
        None, validation_alias=_env("dagster_webserver_url", "DAGSTER_WEBSERVER_URL"),
        description="the webserver's address for launching runs (default: DAGSTER_UI_URL)")
    heartbeat_max_age_seconds: float = Field(
        DEFAULT_HEARTBEAT_MAX_AGE_SECONDS, ge=0, allow_inf_nan=False,
        validation_alias=_env("heartbeat_max_age_seconds", "SCHEDULER_HEARTBEAT_MAX_AGE_SECONDS"),
        description="daemon heartbeat age above which /stats, /health and /metrics count the daemon down")
    # Read-only pages (/executions, /stats) are served from memory for this long (0: off); see response_cache.py.
    cache_seconds: float = Field(DEFAULT_CACHE_SECONDS, ge=0, allow_inf_nan=False,
                                 validation_alias=_env("cache_seconds", "MAINTENANCE_API_CACHE_SECONDS"),
                                 description="/executions and /stats are served from memory for this long")
    metrics_cache_seconds: float = Field(
        DEFAULT_METRICS_CACHE_SECONDS, ge=0, allow_inf_nan=False,
        validation_alias=_env("metrics_cache_seconds", "MAINTENANCE_API_METRICS_CACHE_SECONDS"),
        description="/metrics is rendered at most once per this many seconds; scrapes in between share it")
    workers: int = Field(1, ge=1, validation_alias=_env("workers", "MAINTENANCE_API_WORKERS"),
                         description="worker processes (maintenance-api --workers)")
    prometheus_multiproc_dir: str | None = Field(
        None, validation_alias=_env("prometheus_multiproc_dir", "PROMETHEUS_MULTIPROC_DIR"),
        description="internal: where --workers N keep their request counters (prometheus_client's variable)")
    # The deployment's code servers, pinged by /health and /metrics (platform_monitoring/liveness.py); comma-separated
    # location=host:port in the environment, as in its workspace.yaml. Empty: none (the local stack's are
    # subprocesses of the webserver and the daemon).
    code_servers: Annotated[tuple[CodeServer, ...], NoDecode] = Field(
        (), validation_alias=_env("code_servers", "CODE_SERVER_ADDRESSES"),
        description="code servers to ping, e.g. racing_orchestration=code-racing:4000,maintenance_jobs=...")

    @field_validator("public_paths", mode="before")
    @classmethod
    def _comma_separated(cls, value: Any) -> Any:
        if isinstance(value, str):
            return frozenset(p.strip() for p in value.split(",") if p.strip())
        return value

    @field_validator("code_servers", mode="before")
    @classmethod
    def _code_servers(cls, value: Any) -> Any:
        return parse_code_servers(value) if isinstance(value, str) else value

    @field_validator("dagster_ui_url", "dagster_webserver_url")
    @classmethod
    def _no_trailing_slash(cls, value: str | None) -> str | None:
        return value.rstrip("/") or None if value else value

    @model_validator(mode="after")
    def _platform_defaults(self) -> ApiSettings:
        platform = platform_settings()
        if self.registry_url is None:
            object.__setattr__(self, "registry_url", secret(platform.maintenance_database_url))
        if self.registry_url is None:
            raise ApiConfigError("MAINTENANCE_DATABASE_URL is not set (the task registry database)")
        if self.dagster_database_url is None:
            object.__setattr__(self, "dagster_database_url", secret(platform.dagster_postgres_url))
        if self.dagster_home is None:
            object.__setattr__(self, "dagster_home", platform.dagster_home)
        if self.racing_database_url is None:
            object.__setattr__(self, "racing_database_url", secret(platform.racing_database_url))
        if self.dagster_ui_url is None:
            object.__setattr__(self, "dagster_ui_url", platform.dagster_ui_url.rstrip("/"))
        return self

    @model_validator(mode="after")
    def _key_rules(self) -> ApiSettings:
        if self.api_key_file:
            object.__setattr__(self, "api_key", read_key_file(self.api_key_file))
        elif self.api_key is not None and self.api_key != self.api_key.strip():
            # Clients would send the key without it (or a proxy strip it): refuse rather than reject every request.
            raise ApiConfigError("SCHEDULER_API_KEY has leading or trailing whitespace: set it to the key alone")
        if not self.api_key and not self.insecure_dev:
            raise ApiConfigError(
                "no API key: set SCHEDULER_API_KEY or SCHEDULER_API_KEY_FILE (or --api-key-file); "
                "--insecure-dev serves without authentication for local development only"
            )
        if self.api_key is not None and len(self.api_key.strip()) < 8:
            raise ApiConfigError("the API key must be at least 8 characters")
        return self

    @property
    def webserver_url(self) -> str:
        return self.dagster_webserver_url or self.dagster_ui_url


def read_key_file(path: str | Path) -> str:
    """The key in `path` (surrounding whitespace stripped), with an error naming the file.

    The file must not be readable or writable by group or others (mode 600 or 400, as `chmod 600` makes it).
    """
    try:
        mode = os.stat(path).st_mode
        key = Path(path).read_text().strip()
    except OSError as exc:
        raise ApiConfigError(f"cannot read API key file {path}: {exc.strerror}") from None
    if mode & (stat.S_IRWXG | stat.S_IRWXO):
        raise ApiConfigError(f"API key file {path} is accessible to group or others (mode {stat.S_IMODE(mode):o}): "
                             f"restrict it to its owner with `chmod 600 {path}`")
    if not key:
        raise ApiConfigError(f"API key file {path} is empty")
    return key


def api_key_from_env(key_file: str | None = None) -> str | None:
    """`--api-key-file`, else SCHEDULER_API_KEY_FILE, else SCHEDULER_API_KEY."""
    if key_file:
        return read_key_file(key_file)
    return ApiSettings(registry_url="unused", insecure_dev=True).api_key


def public_paths_from_env() -> frozenset[str]:
    """SCHEDULER_API_PUBLIC_PATHS: comma-separated paths served without a key (default: health, docs, metrics)."""
    return ApiSettings(registry_url="unused", insecure_dev=True).public_paths


def settings_from_env(*, key_file: str | None = None, insecure_dev: bool = False) -> ApiSettings:
    """The settings from the environment, with the command line's --api-key-file and --insecure-dev on top."""
    overrides: dict[str, Any] = {}
    if key_file:
        overrides["api_key_file"] = key_file
    if insecure_dev:
        overrides["insecure_dev"] = True
    try:
        return ApiSettings(**overrides)
    except ValidationError as exc:
        raise ApiConfigError(describe(exc)) from None


# Field name -> the variable an operator sets, for error messages.
ENV_NAMES = {
    name: next((a for a in field.validation_alias.choices if a.isupper() or a.startswith("_")), name.upper())
    if isinstance(field.validation_alias, AliasChoices) else name.upper()
    for name, field in ApiSettings.model_fields.items()
}


def describe(exc: ValidationError) -> str:
    """One line per invalid setting, naming the environment variable."""
    problems = []
    for error in exc.errors():
        field = str(error["loc"][0]) if error["loc"] else ""
        name = ENV_NAMES.get(field, field)
        if error["type"] == "missing":
            problems.append(f"{name} is not set" + (" (the task registry database)" if field == "registry_url" else ""))
        else:
            problems.append(f"{name}: {error['msg']} (got {error.get('input')!r})")
    return "; ".join(problems)
