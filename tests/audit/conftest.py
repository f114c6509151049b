"""Fixtures for the audit tests: a real HTTP server on 127.0.0.1 that records webhook POSTs."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

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
