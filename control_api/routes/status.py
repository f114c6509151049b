"""`/stats`, `/health`, `/schedulers` and `/metrics`: the state of the scheduler and of the databases behind it."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Depends
from fastapi.responses import JSONResponse, Response
from prometheus_client import CONTENT_TYPE_LATEST, generate_latest

from platform_monitoring import schedulers, status
from control_api.deps import ApiState, api_state, cached_from

router = APIRouter(tags=["status"])
State = Annotated[ApiState, Depends(api_state)]


@router.get("/stats", response_model=status.Stats)
async def stats(state: State):
    return await state.cached_response(("stats",), lambda: status.stats(
        state.dagster, state.prepared_registry(), state.settings.heartbeat_max_age_seconds,
        state.instance_config).model_dump_json())


@router.get("/health", response_model=status.Health,
            responses={503: {"model": status.Health, "description": "a database is unreachable"}})
def health(state: State):
    # Opening Dagster's storage engine is part of the Dagster probe (it fails when no database is configured).
    result = status.health(lambda: state.dagster, state.registry, state.settings.heartbeat_max_age_seconds,
                           config=state.instance_config, probes=state.health_probes, catalog=state.catalog,
                           code_servers=state.settings.code_servers)
    return JSONResponse(result.model_dump(mode="json"), status_code=503 if result.status == "unavailable" else 200)


@router.get("/schedulers", response_model=list[schedulers.Instigator],
            responses={503: {"description": "the Dagster webserver has not listed the schedules and sensors yet"}})
def list_schedulers(state: State):
    # What exists comes from the webserver (its last answer while it is down); state and ticks from storage. Before
    # the webserver ever answered, CatalogUnavailable is a 503 (control_api/app.py).
    return list(schedulers.list_instigators(state.dagster, state.catalog().instigators))


@router.get("/metrics", response_class=Response,
            responses={200: {"content": {CONTENT_TYPE_LATEST: {}}, "description": "Prometheus text format"}})
async def metrics(state: State):
    # Public and polled by anyone who can reach the port: rendered once per MAINTENANCE_API_METRICS_CACHE_SECONDS,
    # served from memory in between (concurrent scrapes of an expired page wait for one rendering).
    return await cached_from(state.metrics_cache, ("metrics",), lambda: generate_latest(state.metrics_registry),
                             CONTENT_TYPE_LATEST)
