"""Shared state of one app (the registry's and Dagster storage's engines) and the route dependencies that hand it
out."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable
from functools import cached_property
from typing import NamedTuple

import sqlalchemy as sa
from fastapi import Request
from fastapi.concurrency import run_in_threadpool
from fastapi.responses import Response

from control_api.config import ApiSettings
from control_api.response_cache import ResponseCache
from maintenance_jobs.seed import prepare_registry
from orchestration_core.dagster_webserver import DagsterWebserverClient
from orchestration_core.instance_config import InstanceConfig, read_instance_config
from orchestration_core.postgres import create_engine
from platform_monitoring.catalog import QUERY_TIMEOUT_SECONDS, WebserverCatalog
from platform_monitoring.status import HealthProbes


class DagsterStorageNotSet(RuntimeError):
    """The API was given no Dagster storage database: its pages over runs cannot answer."""


class ApiState:
    """Opened lazily, so the API starts (and `/health` answers 503) while a database is still down."""

    def __init__(self, settings: ApiSettings) -> None:
        self.settings = settings
        self._lock = threading.Lock()
        self._registry_prepared = False
        self.responses = ResponseCache(settings.cache_seconds)
        self.metrics_cache = ResponseCache(settings.metrics_cache_seconds, max_entries=1)  # never cleared by writes
        self.health_probes = HealthProbes()  # /health's time-bounded database probes (one in flight per store)

    @cached_property
    def registry(self) -> sa.Engine:
        # Sized for the API's thread pool; a short connect timeout keeps /health answering when Postgres is gone.
        return create_engine(self.settings.registry_url, "api")

    @cached_property
    def dagster(self) -> sa.Engine:
        """Dagster's storage database (runs, events, schedules), read by SQL on the tables
        orchestration_core/dagster_schema.py declares: the API does not import Dagster."""
        url = self.settings.dagster_database_url
        if url is None:
            raise DagsterStorageNotSet("DAGSTER_POSTGRES_URL is not set (Dagster's storage database)")
        return create_engine(url, "api_dagster")

    @cached_property
    def instance_config(self) -> InstanceConfig:
        """What the API needs of the instance's dagster.yaml (read once)."""
        return read_instance_config(self.settings.dagster_home)

    @cached_property
    def racing(self) -> sa.Engine | None:
        """The race database, read for /metrics; None when the API is not given one."""
        url = self.settings.racing_database_url
        return create_engine(url, "api_metrics") if url else None

    def prepared_registry(self) -> sa.Engine:
        """The registry engine after migrating and seeding once (the same first use as the code location's)."""
        if not self._registry_prepared:
            with self._lock:
                if not self._registry_prepared:
                    prepare_registry(self.settings.registry_url)
                    self._registry_prepared = True
        return self.registry

    @cached_property
    def webserver(self) -> DagsterWebserverClient:
        return DagsterWebserverClient(self.settings.webserver_url)

    @cached_property
    def catalog(self) -> WebserverCatalog:
        """The schedules, sensors and jobs of every code location, as the webserver lists them."""
        return WebserverCatalog(DagsterWebserverClient(self.settings.webserver_url,
                                                       timeout_seconds=QUERY_TIMEOUT_SECONDS))

    async def cached_response(self, key: tuple, compute: Callable[[], str | bytes | CachedPage]) -> Response:
        """A read-only page from the response cache, or built by `compute` (one flight per key).

        `compute` returns the JSON body, or a CachedPage when headers (e.g. `Link`) belong to the page: they are
        cached with the body, so a cached page never pairs one query's body with another's headers.

        A usable page is answered on the event loop (an ageing one also starts one refresh in a worker thread);
        building a missing one (blocking database reads) runs in the thread pool, like FastAPI's sync routes.
        """
        return await cached_from(self.responses, key, compute, "application/json")

    def close(self) -> None:
        for engine in ("registry", "dagster", "racing"):  # only those that were opened
            if self.__dict__.get(engine) is not None:
                self.__dict__[engine].dispose()


async def cached_from(cache: ResponseCache, key: tuple, compute: Callable[[], str | bytes | CachedPage],
                      media_type: str) -> Response:
    """A page of `cache` (see ApiState.cached_response): served on the event loop when usable, else built once in
    the thread pool while concurrent requests for the same key wait for that one build."""
    compute_page = lambda: _as_page(compute())  # noqa: E731
    page, refresh = cache.peek(key)
    if refresh:
        asyncio.get_running_loop().run_in_executor(None, cache.refresh, key, compute_page)
    if page is None:
        page = await run_in_threadpool(cache.get, key, compute_page)
    return Response(page.body, media_type=media_type, headers=dict(page.headers))


class CachedPage(NamedTuple):
    """A cached response: its JSON body and the headers that go with it."""

    body: bytes
    headers: tuple[tuple[str, str], ...] = ()


def _as_page(page: str | bytes | CachedPage) -> CachedPage:
    if isinstance(page, CachedPage):
        return page
    return CachedPage(page.encode() if isinstance(page, str) else page)


def api_state(request: Request) -> ApiState:
    return request.app.state.api


def registry(request: Request) -> sa.Engine:
    return api_state(request).prepared_registry()

