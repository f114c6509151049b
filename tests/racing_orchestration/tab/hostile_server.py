"""A local HTTP server on a real socket that answers the way a hostile or broken TAB API could: bodies that drip a
byte at a time, headers that never end, a body announced as 4 GiB, an endless body, or a canned status and body.

Every handler stops on its own (after `max_seconds` or `max_bytes`), so a client without bounds still returns and a
test against it fails on its assertions instead of hanging.
"""

from __future__ import annotations

import http.server
import socket
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field

CHUNK = b"\0" * 65536


@dataclass
class Behaviour:
    kind: str  # "drip-body", "drip-headers", "huge-length", "endless", "canned"
    status: int = 200
    body: bytes = b""
    interval: float = 0.5  # seconds between dripped bytes
    max_seconds: float = 12.0  # a drip stops (closes the connection) after this long
    max_bytes: int = 48 * 1024 * 1024  # a huge or endless body stops after this many bytes
    sent: list[int] = field(default_factory=list)  # bytes of body sent, per request that has ended
    requests: int = 0  # requests whose handling began


class _Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    behaviour: Behaviour

    def log_message(self, format: str, *args) -> None:  # quiet
        pass

    def do_GET(self) -> None:  # noqa: N802 (the standard library's name)
        b = self.server.behaviour  # type: ignore[attr-defined]
        b.requests += 1
        sent = 0
        try:
            if b.kind == "canned":
                self.send_response(b.status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(b.body)))
                self.end_headers()
                self.wfile.write(b.body)
                sent = len(b.body)
            elif b.kind == "drip-body":
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", "100000")
                self.end_headers()
                self.wfile.flush()
                sent = self._drip(b, b"x")
                self.close_connection = True
            elif b.kind == "drip-headers":
                self.wfile.write(b"HTTP/1.1 200 OK\r\nX-Slow: ")
                self.wfile.flush()
                self._drip(b, b"a")
                self.close_connection = True
            elif b.kind in ("huge-length", "endless"):
                # A small send buffer, so what the server counts as sent is close to what the client took.
                self.connection.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 65536)
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                if b.kind == "huge-length":
                    self.send_header("Content-Length", str(4 * 1024 ** 3))
                else:  # no length: the body runs until the connection closes
                    self.send_header("Connection", "close")
                self.end_headers()
                while sent < b.max_bytes:
                    self.wfile.write(CHUNK)
                    sent += len(CHUNK)
                self.close_connection = True
        except OSError:  # the client hung up: what a bounded client does
            self.close_connection = True
        finally:
            b.sent.append(sent)

    def _drip(self, b: Behaviour, byte: bytes) -> int:
        started, sent = time.monotonic(), 0
        while time.monotonic() - started < b.max_seconds:
            self.wfile.write(byte)
            self.wfile.flush()
            sent += 1
            time.sleep(b.interval)
        return sent


class _Server(http.server.ThreadingHTTPServer):
    daemon_threads = True
    behaviour: Behaviour


@contextmanager
def hostile_server(behaviour: Behaviour) -> Iterator[str]:
    """Serve `behaviour` on 127.0.0.1 (an ephemeral port); yields the base URL. On exit it waits (at most a handler's
    own bound) for the handlers still writing to end, so `behaviour.sent` is complete: a handler learns that the
    client hung up only when its next write fails, which on a loaded host came after a test had read `sent`."""
    server = _Server(("127.0.0.1", 0), _Handler)
    server.behaviour = behaviour
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/affiliates/v1/racing"
    finally:
        server.shutdown()
        server.server_close()
        deadline = time.monotonic() + behaviour.max_seconds + 5
        while len(behaviour.sent) < behaviour.requests and time.monotonic() < deadline:
            time.sleep(0.05)
