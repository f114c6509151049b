"""Is the Dagster daemon doing its job, and does each code server answer? For `/health` and `/metrics`, within 30 s.

The daemon: Dagster's own heartbeats come every 30 s (a loop that yields late adds more), so they alone can only say
"down" after ~90 s. The sensor daemon's ticks are the faster witness: it starts a tick for every running sensor whose
interval has passed, every 5 s, so with 15 s checkpoint sensors running the newest sensor tick is never more than
~20 s old while it works. A daemon counts as down when a required daemon's heartbeat is older than the heartbeat
limit, or when the newest tick of the running sensors is older than their shortest interval plus SENSOR_TICK_SLACK
(30 s with the 15 s sensors): a stopped daemon shows within 30 s. For the alert only, a daemon that has not beaten
since the control API started counts as starting for DAEMON_STARTUP_GRACE_SECONDS (`daemon_starting`).

The code servers: one standard gRPC health check each (grpc.health.v1, the question `dagster api grpc-health-check`
asks; orchestration_core/code_server_probe.py), in parallel, with a 2 s timeout; anything but SERVING is down. Their
addresses come from CODE_SERVER_ADDRESSES (`location=host:port,...`, the same as the deployment's workspace.yaml;
tests/deploy checks the two agree). Without it (the local stack, whose code servers are subprocesses of the webserver
and the daemon) nothing is checked.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

from orchestration_core.code_server_probe import code_server_status

log = logging.getLogger(__name__)
# The sensor daemon's loop (Dagster's MIN_INTERVAL_LOOP_TIME, 5 s) plus a margin for a loaded host.
SENSOR_TICK_SLACK_SECONDS = 15.0
PING_TIMEOUT_SECONDS = 2
# How long after the control API starts a daemon that has not beaten since counts as starting rather than down (for
# the alert, not for /health): in the compose deployment the daemon starts only once both code servers are healthy,
# which on a loaded 2-core host took over 2 minutes, and DagsterDaemonDown paged on an ordinary `docker compose up`.
DAEMON_STARTUP_GRACE_SECONDS = 300.0
# Daemons heartbeat every 30 s; two missed beats and a margin mean "not running".
DEFAULT_HEARTBEAT_MAX_AGE_SECONDS = 90.0
# The daemons that must be alive for registry tasks to be dispatched and launched.
SCHEDULING_DAEMONS = ("SENSOR", "QUEUED_RUN_COORDINATOR")


@dataclass(frozen=True)
class CodeServer:
    location: str
    host: str
    port: int


def parse_code_servers(value: str | None) -> tuple[CodeServer, ...]:
    """`racing_orchestration=code-racing:4000,maintenance_jobs=code-maintenance:4000` → servers; ValueError naming
    the bad entry."""
    servers = []
    for entry in (value or "").split(","):
        entry = entry.strip()
        if not entry:
            continue
        location, _, address = entry.partition("=")
        host, _, port = address.rpartition(":")
        if not location.strip() or not host or not port.isdigit():
            raise ValueError(f"{entry!r} is not location=host:port")
        servers.append(CodeServer(location.strip(), host, int(port)))
    return tuple(servers)


class CodeServerNotServing(Exception):
    """The code server's health check answered something other than SERVING, or nothing within the timeout."""


def check_code_server(server: CodeServer, timeout_seconds: float = PING_TIMEOUT_SECONDS) -> None:
    """One health check of `server`; raises CodeServerNotServing naming the answer ("UNREACHABLE (UNAVAILABLE)",
    "NOT_SERVING", ...) unless it is SERVING."""
    status = code_server_status(server.host, server.port, timeout_seconds)
    if status != "SERVING":
        raise CodeServerNotServing(f"{server.host}:{server.port} answered {status}")


@dataclass(frozen=True)
class DaemonLiveness:
    up: bool
    problems: list[str]  # why it counts as down, e.g. "no SENSOR heartbeat for 95 s"
    newest_sensor_tick_age_seconds: float | None  # None: no running sensor has ticked


def daemon_liveness(heartbeat_ages: Mapping[str, float], required: Iterable[str], heartbeat_max_age: float,
                    running_sensor_intervals: Sequence[float], newest_sensor_tick_age: float | None) -> DaemonLiveness:
    """Pure. `running_sensor_intervals`: the minimum interval of each running sensor (empty: none runs, and only the
    heartbeats count); `newest_sensor_tick_age`: seconds since the newest tick of any of them (None: none yet)."""
    problems = []
    for kind in sorted(required):
        age = heartbeat_ages.get(kind)
        if age is None:
            problems.append(f"no {kind} heartbeat")
        elif age > heartbeat_max_age:
            problems.append(f"no {kind} heartbeat for {age:.0f} s")
    if running_sensor_intervals:
        limit = min(running_sensor_intervals) + SENSOR_TICK_SLACK_SECONDS
        if newest_sensor_tick_age is None:
            problems.append("no sensor has ticked")
        elif newest_sensor_tick_age > limit:
            problems.append(f"no sensor tick for {newest_sensor_tick_age:.0f} s (expected every "
                            f"{min(running_sensor_intervals):.0f} s)")
    return DaemonLiveness(not problems, problems, newest_sensor_tick_age)


def daemon_starting(heartbeat_ages: Mapping[str, float], watched_for: float,
                    grace: float = DAEMON_STARTUP_GRACE_SECONDS) -> bool:
    """Pure. True while the daemon may still be starting with the deployment: the control API has been watching for
    `watched_for` seconds, less than `grace`, and no daemon has beaten since it began (older heartbeats are a previous
    start's). A daemon that beat since then and stopped is down, not starting; one that never beats counts as down
    once the grace is over."""
    return watched_for < grace and all(age >= watched_for for age in heartbeat_ages.values())


def code_server_states(servers: Sequence[CodeServer],
                       ping: Callable[[CodeServer], None] | None = None) -> dict[str, str]:
    """location → "ok" or "unreachable (…)": every server pinged at once, so the answer takes one timeout at most."""
    if not servers:
        return {}
    ping = ping or check_code_server

    def state(server: CodeServer) -> str:
        try:
            ping(server)
        except Exception as exc:  # any failure means the daemon cannot reach it either
            log.warning("code server %s (%s:%s) unreachable: %s", server.location, server.host, server.port,
                        str(exc).splitlines()[0] if str(exc) else type(exc).__name__)
            return f"unreachable ({type(exc).__name__})"
        return "ok"

    with ThreadPoolExecutor(max_workers=len(servers), thread_name_prefix="ping") as pool:
        return dict(zip((s.location for s in servers), pool.map(state, servers), strict=True))


def sensor_tick_inputs(sensors: Iterable[tuple[bool, float | None, float]], now: float) -> tuple[list[float], float | None]:
    """(running, last tick time, interval) of each sensor → the intervals of the running sensors that have ticked and
    the age of the newest of their ticks. A sensor the daemon never ticked says nothing about the daemon (a new
    instance, or one whose daemon never ran): only the heartbeats count until one has."""
    ticked = [(last, interval) for running, last, interval in sensors if running and last is not None]
    if not ticked:
        return [], None
    return [interval for _, interval in ticked], max(0.0, now - max(last for last, _ in ticked))
