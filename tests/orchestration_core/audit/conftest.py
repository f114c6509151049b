"""Fixtures for the audit tests: a webhook-capturing HTTP server on 127.0.0.1 and a DAGSTER_HOME for the CLI."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest


@dataclass
class CapturedWebhook:
    url: str
    posts: list[dict] = field(default_factory=list)
    status: int = 200  # what the server answers; tests flip it to simulate an outage


@pytest.fixture
def webhook() -> Iterator[CapturedWebhook]:
    captured = CapturedWebhook(url="")

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:  # noqa: N802 (http.server API)
            body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
            if self.headers.get("Content-Type", "").startswith("application/json"):
                captured.posts.append(json.loads(body))
            self.send_response(captured.status)
            self.end_headers()
            self.wfile.write(b"ok")

        def log_message(self, *args) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    captured.url = f"http://127.0.0.1:{server.server_address[1]}/hooks/alerts"
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield captured
    finally:
        server.shutdown()
        server.server_close()


@pytest.fixture
def dagster_home(tmp_path: Path, dagster_database_url: str, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A DAGSTER_HOME whose dagster.yaml points at the test database, so the CLI's DagsterInstance.get() finds it."""
    (tmp_path / "dagster.yaml").write_text(f"storage:\n  postgres:\n    postgres_url: {dagster_database_url}\n")
    monkeypatch.setenv("DAGSTER_HOME", str(tmp_path))
    return tmp_path
