"""The control API's container healthcheck (control_api/container_probe.py): serving is "answers with its health
report", 200 or 503; silence, a refused connection, a hang or any other answer is not serving. Probed over real
sockets against a small HTTP server that answers what each case needs (the real API's answers are probed in
tests/control_api/test_metrics_and_status.py)."""

from __future__ import annotations

import json
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from control_api.container_probe import judge, main, probe
from tests.conftest import REPO_ROOT

pytestmark = pytest.mark.unit

REPORT = {"status": "unavailable", "registry_database": "timed out after 0.8 s", "dagster_storage": "ok",
          "refused_tasks": [], "code_servers": {"racing_orchestration": "ok"}}


@contextmanager
def answering(code: int, body: bytes, delay: float = 0.0) -> Iterator[str]:
    """An HTTP server on a free port that answers every GET with `code` and `body` after `delay` seconds."""
    class Handler(BaseHTTPRequestHandler):
        def do_GET(self):  # noqa: N802 (http.server's name)
            time.sleep(delay)
            self.send_response(code)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args):
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/health"
    finally:
        server.shutdown()
        server.server_close()


@pytest.mark.parametrize(("code", "report", "serving"), [
    (200, {"status": "ok"}, True),
    (200, {"status": "degraded"}, True),
    (503, {"status": "unavailable"}, True),  # the API answers; a database does not (its own check says so)
    (500, {"status": "ok"}, False),
    (404, {"detail": "Not Found"}, False),
    (200, {"detail": "no status"}, False),
    (200, ["status"], False),
    (200, {"status": 1}, False),
])
def test_only_the_health_report_with_200_or_503_counts_as_serving(code, report, serving) -> None:
    assert judge(code, json.dumps(report).encode())[0] is serving


@pytest.mark.parametrize("body", [b"", b"<html>proxy error</html>", b"\xff\xfe", b"{\"status\": "])
def test_a_body_that_is_not_a_report_is_not_serving(body: bytes) -> None:
    serving, said = judge(200, body)
    assert not serving and said.startswith("HTTP 200 without a health report")


def test_a_503_report_passes_and_says_which_store_did_not_answer() -> None:
    with answering(503, json.dumps(REPORT).encode()) as url:
        serving, said = probe(url)
    assert serving
    assert said.startswith("HTTP 503 ")
    assert json.loads(said.removeprefix("HTTP 503 ")) == {
        "status": "unavailable", "registry_database": "timed out after 0.8 s", "dagster_storage": "ok",
        "code_servers": {"racing_orchestration": "ok"}}


def test_an_api_that_does_not_answer_in_time_fails() -> None:
    # The server answers only after 30 s: a probe back well before that gave up at its own timeout (0.5 s), however
    # slowly a starved host ran it; one that waited for the answer (no timeout, or a much longer one) is not back.
    with answering(200, b'{"status": "ok"}', delay=30) as url:
        started = time.monotonic()
        serving, said = probe(url, timeout_seconds=0.5)
        took = time.monotonic() - started
    assert not serving and said.startswith(f"no answer from {url}: ") and "timed out" in said
    assert took < 15, f"the probe waited {took:.1f} s for an answer it should have given up on after 0.5 s"


def test_a_refused_connection_fails() -> None:
    with socket.socket() as sock:  # a port nothing listens on once closed
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    serving, said = probe(f"http://127.0.0.1:{port}/health", timeout_seconds=2)
    assert not serving and "Connection refused" in said


def test_the_default_timeout_stays_inside_the_compose_check_timeout() -> None:
    from control_api.container_probe import TIMEOUT_SECONDS
    assert TIMEOUT_SECONDS == 8.0  # docker-compose.yml gives the check 10 s (tests/deploy/test_compose.py)


@pytest.mark.parametrize("argv", [["a", "b"], ["http://x/1", "http://x/2", "http://x/3"]])
def test_bad_arguments_exit_2(argv) -> None:
    assert main(argv) == 2


def test_the_command_exits_0_on_a_report_and_1_on_an_error_page_without_loading_the_project() -> None:
    """The production command, run the way Docker runs it: a new interpreter that imports neither the API's
    dependencies nor Dagster (a check every 15 s must stay cheap on a loaded host)."""
    command = [sys.executable, "-X", "importtime", "-m", "control_api.container_probe"]
    with answering(503, json.dumps(REPORT).encode()) as url:
        passed = subprocess.run([*command, url], cwd=REPO_ROOT, capture_output=True, text=True, timeout=60)
    assert passed.returncode == 0, passed.stderr[-2000:]
    assert passed.stdout.startswith("HTTP 503 ")
    imported = {line.rsplit("|", 1)[-1].strip().split(".")[0] for line in passed.stderr.splitlines() if "|" in line}
    assert "urllib" in imported
    assert not imported & {"dagster", "fastapi", "sqlalchemy", "httpx", "pydantic", "maintenance_jobs",
                           "racing_orchestration", "orchestration_core"}
    with answering(502, b"<html>bad gateway</html>") as url:
        failed = subprocess.run([*command, url], cwd=REPO_ROOT, capture_output=True, text=True, timeout=60)
    assert failed.returncode == 1
    assert "HTTP 502 without a health report" in failed.stderr
