"""Settings of the control API, read from the environment (and the command line) once at start-up."""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import dagster as dg

from control_api.docs_page import DOCS_ASSET_PATHS

DEFAULT_PUBLIC_PATHS = (
    frozenset({"/health", "/docs", "/docs/oauth2-redirect", "/openapi.json", "/metrics"}) | DOCS_ASSET_PATHS
)
DEFAULT_DAGSTER_UI_URL = "http://127.0.0.1:3000"
# Daemons heartbeat every 30 s; two missed beats and a margin mean "not running".
DEFAULT_HEARTBEAT_MAX_AGE_SECONDS = 90.0
DEFAULT_CACHE_SECONDS = 1.0
# The daemons that must be alive for registry tasks to be dispatched and launched.
SCHEDULING_DAEMONS = ("SENSOR", "QUEUED_RUN_COORDINATOR")
# Set by `maintenance-api --workers N` for its worker processes only: carries --insecure-dev to them.
INSECURE_DEV_ENV = "_MAINTENANCE_API_INSECURE_DEV"


class ApiConfigError(ValueError):
    """The API cannot start with this configuration (e.g. no API key and no --insecure-dev)."""


@dataclass(frozen=True)
class ApiSettings:
    """What `create_app` needs. `instance` is a factory so tests can hand in their own instance."""

    registry_url: str
    api_key: str | None = None
    insecure_dev: bool = False
    instance: Callable[[], dg.DagsterInstance] = dg.DagsterInstance.get
    racing_database_url: str | None = None
    public_paths: frozenset[str] = DEFAULT_PUBLIC_PATHS
    dagster_ui_url: str = DEFAULT_DAGSTER_UI_URL
    # Where this process reaches the webserver's GraphQL API to launch runs (manual triggers); None: dagster_ui_url.
    # In compose the two differ: users reach 127.0.0.1:3000, the API reaches the `webserver` service.
    dagster_webserver_url: str | None = None
    heartbeat_max_age_seconds: float = DEFAULT_HEARTBEAT_MAX_AGE_SECONDS
    # Read-only pages (/executions, /stats) are served from memory for this long (0: off); see response_cache.py.
    cache_seconds: float = 0.0
    # Hold pooled connections to Dagster storage (its default opens one per query) and cap statement time.
    optimize_instance: bool = True

    def __post_init__(self) -> None:
        if not self.api_key and not self.insecure_dev:
            raise ApiConfigError(
                "no API key: set SCHEDULER_API_KEY or SCHEDULER_API_KEY_FILE (or --api-key-file); "
                "--insecure-dev serves without authentication for local development only"
            )
        if self.api_key is not None and len(self.api_key.strip()) < 8:
            raise ApiConfigError("the API key must be at least 8 characters")


    @property
    def webserver_url(self) -> str:
        return self.dagster_webserver_url or self.dagster_ui_url


def read_key_file(path: str | Path) -> str:
    """The key in `path` (surrounding whitespace stripped), with an error naming the file."""
    try:
        key = Path(path).read_text().strip()
    except OSError as exc:
        raise ApiConfigError(f"cannot read API key file {path}: {exc.strerror}") from None
    if not key:
        raise ApiConfigError(f"API key file {path} is empty")
    return key


def api_key_from_env(key_file: str | None = None) -> str | None:
    """`--api-key-file`, else SCHEDULER_API_KEY_FILE, else SCHEDULER_API_KEY."""
    path = key_file or os.environ.get("SCHEDULER_API_KEY_FILE")
    if path:
        return read_key_file(path)
    return os.environ.get("SCHEDULER_API_KEY") or None


def public_paths_from_env() -> frozenset[str]:
    """SCHEDULER_API_PUBLIC_PATHS: comma-separated paths served without a key (default: health, docs, metrics)."""
    raw = os.environ.get("SCHEDULER_API_PUBLIC_PATHS")
    if raw is None:
        return DEFAULT_PUBLIC_PATHS
    return frozenset(p.strip() for p in raw.split(",") if p.strip())


def settings_from_env(*, key_file: str | None = None, insecure_dev: bool = False) -> ApiSettings:
    registry_url = os.environ.get("MAINTENANCE_DATABASE_URL")
    if not registry_url:
        raise ApiConfigError("MAINTENANCE_DATABASE_URL is not set (the task registry database)")
    return ApiSettings(
        registry_url=registry_url,
        api_key=api_key_from_env(key_file),
        insecure_dev=insecure_dev,
        racing_database_url=os.environ.get("RACING_DATABASE_URL") or None,
        public_paths=public_paths_from_env(),
        dagster_ui_url=(os.environ.get("DAGSTER_UI_URL") or DEFAULT_DAGSTER_UI_URL).rstrip("/"),
        dagster_webserver_url=(os.environ.get("DAGSTER_WEBSERVER_URL") or "").rstrip("/") or None,
        heartbeat_max_age_seconds=_float_env("SCHEDULER_HEARTBEAT_MAX_AGE_SECONDS", DEFAULT_HEARTBEAT_MAX_AGE_SECONDS),
        cache_seconds=_float_env("MAINTENANCE_API_CACHE_SECONDS", DEFAULT_CACHE_SECONDS),
    )


def _float_env(name: str, default: float) -> float:
    raw = os.environ.get(name)
    if not raw:
        return default
    try:
        value = float(raw)
    except ValueError:
        raise ApiConfigError(f"{name} must be a number of seconds, got {raw!r}") from None
    if value < 0 or value != value:
        raise ApiConfigError(f"{name} must be a number of seconds >= 0, got {raw!r}")
    return value
