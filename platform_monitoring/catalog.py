"""What the code locations declare (schedules, sensors, jobs), asked of the Dagster webserver's GraphQL.

The webserver knows every code location; asking it keeps the code locations out of this process. One query reads the
whole workspace; the answer is kept for REFRESH_SECONDS (definitions change only when a location is redeployed). When
the webserver cannot answer, the last answer it gave is served, marked stale (`Catalog.problem`); before it ever
answered, `CatalogUnavailable` says why, and each caller reports that part as degraded rather than failing.

What the webserver does not publish, each job's step retry policies, is read from job_policies.json (job_policies.py).
"""

from __future__ import annotations

import ast
import logging
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from orchestration_core.dagster_webserver import DagsterWebserverClient, QueryRejected, WebserverUnavailable

log = logging.getLogger(__name__)
REFRESH_SECONDS = 60.0
# While the answer is incomplete or the webserver down, it is asked again this often (not on every request).
RETRY_SECONDS = 5.0
# A query that takes longer than this is treated as the webserver being unavailable. The catalog is fetched at
# start-up, then by the first request that finds it old; requests meanwhile get the catalog they had at once, and
# wait for that one query (single flight) only when there is none yet.
QUERY_TIMEOUT_SECONDS = 10.0

WORKSPACE_QUERY = """
query MonitoringCatalog {
  workspaceOrError {
    __typename
    ... on Workspace {
      locationEntries {
        name
        locationOrLoadError {
          __typename
          ... on RepositoryLocation {
            repositories {
              name
              schedules {
                name cronSchedule executionTimezone pipelineName defaultStatus
                metadataEntries {
                  label
                  ... on IntMetadataEntry { intValue }
                  ... on FloatMetadataEntry { floatValue }
                }
              }
              sensors { name minIntervalSeconds defaultStatus }
              jobs { name tags { key value } }
            }
          }
          ... on PythonError { message }
        }
      }
    }
    ... on PythonError { message }
  }
}
"""


class CatalogUnavailable(RuntimeError):
    """The webserver has not answered since this process started: schedules, sensors and jobs are unknown."""


@dataclass(frozen=True)
class Definition:
    """A schedule or sensor as its code location declares it."""

    location: str
    repository: str
    kind: str  # schedule | sensor
    name: str
    default_running: bool
    cron_schedule: str | tuple[str, ...] | None = None  # schedules
    timezone: str | None = None  # schedules
    job_name: str | None = None  # schedules
    minimum_interval_seconds: int | None = None  # sensors
    metadata: Mapping[str, float] = field(default_factory=dict)  # a schedule's numeric metadata entries


@dataclass(frozen=True)
class Job:
    location: str
    name: str
    tags: Mapping[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class Catalog:
    instigators: tuple[Definition, ...]
    jobs: tuple[Job, ...]
    problem: str | None = None  # why part of it is an older answer (a location did not load, the webserver is down)


def parse_cron(value: str) -> str | tuple[str, ...]:
    """The webserver shows a schedule of several crons as the text of a Python list (`['0 1 * * *', ...]`)."""
    if value.startswith("["):
        crons = ast.literal_eval(value)
        return crons[0] if len(crons) == 1 else tuple(crons)
    return value


def _metadata(entries: list[dict[str, Any]]) -> dict[str, float]:
    found = {}
    for entry in entries or []:
        number = entry.get("intValue", entry.get("floatValue"))
        if isinstance(number, int | float) and not isinstance(number, bool):
            found[entry["label"]] = float(number)
    return found


def location_entries(data: Mapping[str, Any]) -> tuple[dict[str, tuple[list[Definition], list[Job]]], list[str]]:
    """Pure: a WORKSPACE_QUERY answer -> {location: (its schedules and sensors, its jobs)} for each location that
    loaded, and a problem for each one that did not."""
    workspace = data.get("workspaceOrError") or {}
    if workspace.get("__typename") != "Workspace":
        raise QueryRejected(f"workspace: {workspace.get('__typename')}: {workspace.get('message', '')}".rstrip(": "))
    loaded, problems = {}, []
    for entry in workspace.get("locationEntries") or []:
        location, body = entry["name"], entry.get("locationOrLoadError") or {}
        if body.get("__typename") != "RepositoryLocation":
            problems.append(f"code location {location} did not load ({body.get('__typename') or 'loading'})")
            continue
        instigators, jobs = [], []
        for repository in body.get("repositories") or []:
            name = repository["name"]
            instigators += [Definition(location, name, "schedule", s["name"], s["defaultStatus"] == "RUNNING",
                                       cron_schedule=parse_cron(s["cronSchedule"]), timezone=s["executionTimezone"],
                                       job_name=s["pipelineName"], metadata=_metadata(s.get("metadataEntries")))
                            for s in repository.get("schedules") or []]
            instigators += [Definition(location, name, "sensor", s["name"], s["defaultStatus"] == "RUNNING",
                                       minimum_interval_seconds=s["minIntervalSeconds"])
                            for s in repository.get("sensors") or []]
            jobs += [Job(location, j["name"], {t["key"]: t["value"] for t in j.get("tags") or []})
                     for j in repository.get("jobs") or []]
        loaded[location] = (instigators, jobs)
    return loaded, problems


def merged(answer: Mapping[str, tuple[list[Definition], list[Job]]], problems: list[str],
           previous: Mapping[str, tuple[list[Definition], list[Job]]]) -> tuple[Catalog, dict]:
    """Pure: the locations that answered, plus the previous answer of each one that did not load this time."""
    locations = {**previous, **answer}
    instigators = sorted((d for items, _ in locations.values() for d in items), key=lambda d: (d.location, d.kind,
                                                                                                  d.name))
    jobs = sorted((j for _, items in locations.values() for j in items), key=lambda j: (j.location, j.name))
    return Catalog(tuple(instigators), tuple(jobs), "; ".join(problems) or None), locations


class WebserverCatalog:
    """The catalog of one webserver, kept REFRESH_SECONDS; thread-safe and single-flight (one query at a time). While
    one request refreshes an old catalog, the others are served the old one instead of waiting for the webserver."""

    def __init__(self, client: DagsterWebserverClient, refresh_seconds: float = REFRESH_SECONDS,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self._client = client
        self._refresh = refresh_seconds
        self._clock = clock
        self._lock = threading.Lock()
        self._catalog: Catalog | None = None
        self._locations: dict = {}
        self._fetched_at = float("-inf")

    def __call__(self) -> Catalog:
        if self._due():
            # Nothing to serve yet: wait for the query in flight (or make it). Else only the request that takes the
            # lock asks the webserver; the rest serve what they have.
            if self._lock.acquire(blocking=self._catalog is None):
                try:
                    if self._due():  # another request may have refreshed it while this one waited
                        self._fetch()
                finally:
                    self._lock.release()
        catalog = self._catalog
        if catalog is None:
            raise CatalogUnavailable(self._last_error)
        return catalog

    def _due(self) -> bool:
        age = self._clock() - self._fetched_at
        incomplete = self._catalog is None or self._catalog.problem is not None
        return age >= (min(self._refresh, RETRY_SECONDS) if incomplete else self._refresh)

    def _fetch(self) -> None:
        try:
            answer, problems = location_entries(self._client.query(WORKSPACE_QUERY))
        except (WebserverUnavailable, QueryRejected, KeyError, TypeError, ValueError, SyntaxError) as exc:
            self._last_error = f"the Dagster webserver gave no catalog of schedules, sensors and jobs: {exc}"
            log.warning("%s", self._last_error)
            if self._catalog is not None:
                self._catalog = Catalog(self._catalog.instigators, self._catalog.jobs,
                                        f"last known catalog: {exc}")
            self._fetched_at = self._clock()
            return
        catalog, self._locations = merged(answer, problems, self._locations)
        if catalog.problem and not self._locations:  # no location ever answered: nothing to serve
            self._last_error = catalog.problem
            catalog = None
        self._catalog = catalog  # one assignment: a request reading it meanwhile sees the old or the new one
        self._fetched_at = self._clock()

    _last_error = "the Dagster webserver has not been asked yet"
