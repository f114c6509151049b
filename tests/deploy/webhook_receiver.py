"""A Slack-compatible webhook receiver for tests: stores every POST with the time it arrived, lists them on GET.

Standard library only, so it runs both in the test process (`serve()`, a thread) and as the live production test's
`webhook-receiver` container (`python3 webhook_receiver.py PORT`, tests/production/docker-compose.live.yml), which
Alertmanager and the alert sensors post to instead of Slack.

    POST <any path>   stores {"received_at": unix time, "path": ..., "body": parsed JSON or text}; answers 200
    GET  /messages    the stored posts, oldest first
    GET  /health      200
"""

from __future__ import annotations

import json
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


class Receiver(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self, address: tuple[str, int]) -> None:
        super().__init__(address, Handler)
        self.lock = threading.Lock()
        self.messages: list[dict] = []


class Handler(BaseHTTPRequestHandler):
    server: Receiver

    def do_POST(self) -> None:  # noqa: N802 (http.server API)
        raw = self.rfile.read(int(self.headers.get("Content-Length") or 0))
        try:
            body = json.loads(raw)
        except ValueError:
            body = raw.decode("utf-8", "replace")
        with self.server.lock:
            self.server.messages.append({"received_at": time.time(), "path": self.path, "body": body})
        self._answer(200, b"ok", "text/plain")

    def do_GET(self) -> None:  # noqa: N802
        if self.path == "/messages":
            with self.server.lock:
                payload = json.dumps(self.server.messages).encode()
            self._answer(200, payload, "application/json")
        elif self.path == "/health":
            self._answer(200, b"ok", "text/plain")
        else:
            self._answer(404, b"not found", "text/plain")

    def _answer(self, status: int, payload: bytes, content_type: str) -> None:
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(payload)))
        self.end_headers()
        self.wfile.write(payload)

    def log_message(self, *args) -> None:
        pass


def serve(host: str = "127.0.0.1", port: int = 0) -> tuple[Receiver, threading.Thread]:
    receiver = Receiver((host, port))
    thread = threading.Thread(target=receiver.serve_forever, daemon=True)
    thread.start()
    return receiver, thread


if __name__ == "__main__":
    Receiver(("0.0.0.0", int(sys.argv[1]) if len(sys.argv) > 1 else 8099)).serve_forever()
