"""The daemon's container healthcheck: are the heartbeats of every daemon the instance runs recent? Read straight from
the run storage's `daemon_heartbeats` table, without importing Dagster.

`dagster-daemon liveness-check` loads all of Dagster and the instance first (2-4 s of a CPU on an idle host). The
daemon's container is capped at one CPU that the daemon itself keeps busy; on a loaded host Docker kept a daemon that
was running sensors and launching runs "unhealthy" for 5 minutes, which can only be that check failing or overrunning
its 30 s timeout (its heartbeat limit is 30 minutes). That limit (DAGSTER_DAEMON_HEARTBEAT_TOLERANCE, default 1800 s)
is the other fault: a hung daemon stayed "healthy" for half an hour. This asks the table the same question with
psycopg2 alone (bench/healthcheck_probe.py measures both) and a limit that fits heartbeats written every 30 s.

Usage: `python daemon_probe.py MAX_AGE_SECONDS DAEMON_TYPE...` with DAGSTER_POSTGRES_URL set (the URL
deploy/dagster.yaml reads); exit 0 when every listed daemon type beat within MAX_AGE_SECONDS, 1 with the reason
otherwise (a stale or missing heartbeat, the database not answering), 2 on bad arguments. The daemon types are the
instance's required ones; a test keeps docker-compose.yml's list equal to what deploy/dagster.yaml requires.

The file must stay standalone (stdlib and psycopg2): deploy/Dockerfile.dagster copies it alone into an image without
the project's packages.
"""

from __future__ import annotations

import json
import math
import os
import sys
import time
from collections.abc import Iterable, Mapping

import psycopg2

CONNECT_TIMEOUT_SECONDS = 5
STATEMENT_TIMEOUT_MS = 5000


def heartbeat_problems(heartbeats: Mapping[str, float], required: Iterable[str], now: float,
                       max_age_seconds: float) -> list[str]:
    """Pure: one line per required daemon type whose newest heartbeat (a Unix time) is missing or older than the
    limit; empty when all are recent. A heartbeat from the future (clock skew) counts as recent, as Dagster's check
    counts it."""
    problems = []
    for daemon_type in required:
        beat = heartbeats.get(daemon_type)
        if beat is None:
            problems.append(f"{daemon_type}: no heartbeat")
        elif now - beat > max_age_seconds:
            problems.append(f"{daemon_type}: last heartbeat {now - beat:.0f} s ago (limit {max_age_seconds:.0f} s)")
    return problems


def libpq_url(url: str) -> str:
    """SQLAlchemy's `postgresql+psycopg2://` (what DAGSTER_POSTGRES_URL holds) as the URI libpq accepts."""
    scheme, separator, rest = url.partition("://")
    if not separator or scheme.split("+")[0] not in ("postgresql", "postgres"):
        raise ValueError("DAGSTER_POSTGRES_URL is not a postgresql:// URL")
    return f"postgresql://{rest}"


def read_heartbeats(url: str) -> dict[str, float]:
    """daemon type -> the Unix time of its newest heartbeat, from the serialized heartbeat itself (the `timestamp`
    column is a naive datetime whose zone depends on the writer's session)."""
    with psycopg2.connect(libpq_url(url), connect_timeout=CONNECT_TIMEOUT_SECONDS,
                          options=f"-c statement_timeout={STATEMENT_TIMEOUT_MS}") as connection:
        with connection.cursor() as cursor:
            cursor.execute("SELECT daemon_type, body FROM daemon_heartbeats")
            rows = cursor.fetchall()
    connection.close()
    return {daemon_type: float(json.loads(body)["timestamp"]) for daemon_type, body in rows}


def main(argv: list[str]) -> int:
    try:
        max_age = float(argv[0])
    except (IndexError, ValueError):
        max_age = -1.0
    if not (math.isfinite(max_age) and max_age > 0) or len(argv) < 2:
        print("usage: python daemon_probe.py MAX_AGE_SECONDS DAEMON_TYPE...", file=sys.stderr)
        return 2
    url = os.environ.get("DAGSTER_POSTGRES_URL", "")
    try:
        heartbeats = read_heartbeats(url)
    except (ValueError, KeyError, TypeError, psycopg2.Error) as error:
        # The class only: a connection error's message can hold the URL and its password.
        print(f"daemon heartbeats unreadable: {type(error).__name__}", file=sys.stderr)
        return 1
    problems = heartbeat_problems(heartbeats, argv[1:], time.time(), max_age)
    if problems:
        print("daemon not live: " + "; ".join(problems), file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
