"""`GET /schedulers`: every schedule and sensor of both code locations, with state, ticks and last run outcome.

The definitions of both locations are loaded in this process (`racing_orchestration.definitions.defs`,
`maintenance_jobs.definitions.defs`, once). Each instigator's stored state and ticks are looked up by its selector
id (location, repository, name), which is what the daemon writes, so no gRPC workspace is needed. A schedule's
next tick is its cron's next time in its timezone; a running sensor's is its last tick plus its interval.
"""

from __future__ import annotations

import datetime as dt
import importlib
from collections.abc import Iterator
from dataclasses import dataclass
from functools import lru_cache
from zoneinfo import ZoneInfo

import dagster as dg
from croniter import croniter
from pydantic import BaseModel

from orchestration_core.dagster_internals import InstigatorSelector, InstigatorStatus
from orchestration_core.run_outcome import outcome_of

REPOSITORY_NAME = "__repository__"  # the repository name of a `dg.Definitions` object
LOCATIONS = {
    "racing_orchestration": "racing_orchestration.definitions",
    "maintenance_jobs": "maintenance_jobs.definitions",
}
DEFAULT_SENSOR_INTERVAL_SECONDS = 30


class Instigator(BaseModel):
    name: str
    type: str  # schedule | sensor
    location: str
    state: str  # running | stopped
    cron_schedule: str | None
    timezone: str | None
    minimum_interval_seconds: int | None
    last_tick_at: dt.datetime | None
    last_tick_status: str | None
    next_tick_at: dt.datetime | None
    last_run_id: str | None
    last_run_outcome: str | None
    last_run_at: dt.datetime | None


@dataclass(frozen=True)
class Definition:
    location: str
    kind: str
    definition: dg.ScheduleDefinition | dg.SensorDefinition


@lru_cache(maxsize=1)
def load_definitions() -> tuple[Definition, ...]:
    found: list[Definition] = []
    for location, module in LOCATIONS.items():
        repository = importlib.import_module(module).defs.get_repository_def()
        found += [Definition(location, "schedule", s) for s in repository.schedule_defs]
        found += [Definition(location, "sensor", s) for s in repository.sensor_defs]
    return tuple(sorted(found, key=lambda d: (d.location, d.kind, d.definition.name)))


def next_cron_time(cron: str | list[str], timezone: str | None, after: dt.datetime) -> dt.datetime:
    """The earliest next time of one or several cron strings, in UTC."""
    local = after.astimezone(ZoneInfo(timezone or "UTC"))
    crons = [cron] if isinstance(cron, str) else list(cron)
    return min(croniter(c, local).get_next(dt.datetime) for c in crons).astimezone(dt.UTC)


def _utc(moment: dt.datetime) -> dt.datetime:
    return moment.replace(tzinfo=dt.UTC) if moment.tzinfo is None else moment.astimezone(dt.UTC)


def _state(stored, default_running: bool) -> str:
    if stored is None or stored.status == InstigatorStatus.DECLARED_IN_CODE:
        return "running" if default_running else "stopped"
    return "running" if stored.status == InstigatorStatus.RUNNING else "stopped"


def describe(instance: dg.DagsterInstance, item: Definition, now: dt.datetime) -> Instigator:
    definition = item.definition
    selector = InstigatorSelector(location_name=item.location, repository_name=REPOSITORY_NAME, name=definition.name)
    selector_id = selector.get_id()
    stored = instance.get_instigator_state(selector_id, selector_id)
    state = _state(stored, definition.default_status.value == "RUNNING")
    ticks = instance.get_ticks(selector_id, selector_id, limit=1)
    last_tick = ticks[0] if ticks else None
    last_tick_at = dt.datetime.fromtimestamp(last_tick.timestamp, dt.UTC) if last_tick else None
    cron = timezone = interval = None
    next_tick = None
    if item.kind == "schedule":
        cron, timezone = definition.cron_schedule, definition.execution_timezone
        if state == "running":
            next_tick = next_cron_time(cron, timezone, now)
        cron = cron if isinstance(cron, str) else ", ".join(cron)
    else:
        interval = definition.minimum_interval_seconds or DEFAULT_SENSOR_INTERVAL_SECONDS
        if state == "running":
            next_tick = max(now, last_tick_at + dt.timedelta(seconds=interval)) if last_tick_at else now
    run_tag = "dagster/schedule_name" if item.kind == "schedule" else "dagster/sensor_name"
    runs = instance.get_run_records(filters=dg.RunsFilter(tags={run_tag: definition.name}), limit=1)
    last_run = runs[0] if runs else None
    return Instigator(
        name=definition.name,
        type=item.kind,
        location=item.location,
        state=state,
        cron_schedule=cron,
        timezone=timezone,
        minimum_interval_seconds=interval,
        last_tick_at=last_tick_at,
        last_tick_status=last_tick.status.value.lower() if last_tick else None,
        next_tick_at=next_tick,
        last_run_id=last_run.dagster_run.run_id if last_run else None,
        last_run_outcome=outcome_of(last_run.dagster_run.status, last_run.dagster_run.tags) if last_run else None,
        last_run_at=_utc(last_run.create_timestamp) if last_run else None,
    )


def list_instigators(instance: dg.DagsterInstance, now: dt.datetime | None = None) -> Iterator[Instigator]:
    moment = now or dt.datetime.now(dt.UTC)
    for item in load_definitions():
        yield describe(instance, item, moment)


class InstigatorHealth(BaseModel):
    """One schedule or sensor as `/health` shows it: no task data, nothing but its state and its last tick."""

    name: str
    type: str  # schedule | sensor
    location: str
    running: bool
    last_tick_at: dt.datetime | None
    last_tick_status: str | None  # success | skipped | failure | started


def selector_id(item: Definition) -> str:
    return InstigatorSelector(location_name=item.location, repository_name=REPOSITORY_NAME,
                              name=item.definition.name).get_id()


def instigator_health_rows(items: tuple[Definition, ...], stored: dict[str, object],
                           last_ticks: dict[str, tuple[float, str]]) -> list[InstigatorHealth]:
    """Pure: each definition with its stored state (by selector id; absent = its default) and its last tick
    (timestamp, status) if it ever ticked."""
    rows = []
    for item in items:
        key = selector_id(item)
        state = _state(stored.get(key), item.definition.default_status.value == "RUNNING")
        tick = last_ticks.get(key)
        rows.append(InstigatorHealth(
            name=item.definition.name, type=item.kind, location=item.location, running=state == "running",
            last_tick_at=dt.datetime.fromtimestamp(tick[0], dt.UTC) if tick else None,
            last_tick_status=tick[1] if tick else None,
        ))
    return rows


def instigator_health(instance: dg.DagsterInstance, items: tuple[Definition, ...] | None = None) -> list[InstigatorHealth]:
    """Every schedule and sensor of both locations in two queries: all stored states, and the last tick of each."""
    items = load_definitions() if items is None else items
    stored = {state.selector_id: state for state in instance.all_instigator_state()}
    batches = instance.get_batch_ticks([selector_id(item) for item in items], limit=1)
    last_ticks = {key: (ticks[0].timestamp, ticks[0].status.value.lower()) for key, ticks in batches.items() if ticks}
    return instigator_health_rows(items, stored, last_ticks)
