"""The control API's container healthcheck: is this API process serving? (stdlib only, no project imports).

It asks `GET /health` and passes when the API answers with its health report, whatever the report says: 200 (ok or
degraded) or 503 (a database unreachable, or slower than /health's 0.8 s probe deadline). The report is printed, so
`docker inspect` shows what the API saw. It fails only when the API does not answer in time, refuses the connection
or answers something that is not its report: the process itself is down or wedged.

Why not fail on 503: the databases have healthchecks of their own, and a person hears of an outage through Prometheus
and Alertmanager, which scrape `/metrics`. Failing the API's container because Postgres is slow marked the API
"unhealthy" for minutes on a loaded host (the probe deadline is short so that /health never hangs its callers),
although it served every request, and said nothing the Postgres container did not already say.

Usage: `python -m control_api.container_probe [URL]` (default http://127.0.0.1:8090/health); exit 0 serving, 1 not.
"""

from __future__ import annotations

import json
import sys
import urllib.error
import urllib.request

DEFAULT_URL = "http://127.0.0.1:8090/health"
# Within the compose healthcheck's own 10 s timeout, so a wedged API fails the check rather than timing it out.
TIMEOUT_SECONDS = 8.0
# The fields of /health's report shown in the check's output (the full body can be long).
SHOWN = ("status", "registry_database", "dagster_storage", "schedules_and_sensors_state", "code_servers")


def probe(url: str = DEFAULT_URL, timeout_seconds: float = TIMEOUT_SECONDS) -> tuple[bool, str]:
    """(serving, what it answered)."""
    try:
        with urllib.request.urlopen(url, timeout=timeout_seconds) as response:
            code, body = response.status, response.read(65536)
    except urllib.error.HTTPError as error:
        code, body = error.code, error.read(65536)
    except (OSError, ValueError) as error:  # refused, reset, timed out, bad URL
        return False, f"no answer from {url}: {type(error).__name__}: {error}"
    return judge(code, body)


def judge(code: int, body: bytes) -> tuple[bool, str]:
    """Serving when the answer is /health's report (a JSON object with a `status`) with 200 or 503."""
    try:
        report = json.loads(body)
    except (ValueError, UnicodeDecodeError):
        report = None
    if code not in (200, 503) or not isinstance(report, dict) or not isinstance(report.get("status"), str):
        return False, f"HTTP {code} without a health report: {body[:200]!r}"
    shown = {key: report[key] for key in SHOWN if key in report}
    return True, f"HTTP {code} {json.dumps(shown, sort_keys=True)}"


def main(argv: list[str]) -> int:
    if len(argv) > 1:
        print("usage: python -m control_api.container_probe [URL]", file=sys.stderr)
        return 2
    serving, said = probe(argv[0] if argv else DEFAULT_URL)
    print(said, file=sys.stdout if serving else sys.stderr)
    return 0 if serving else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
