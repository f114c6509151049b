"""The simulated TAB feed: a real HTTP server at the affiliates API's paths (`racing sim`, tests, benchmarks)."""

from __future__ import annotations

import datetime as dt
import socket
import threading
import time
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from racing_orchestration.tab.sim_engine import API_PREFIX, FAULT_KINDS, SimFeed, SimFeedConfig, SimResponse

__all__ = ["API_PREFIX", "FAULT_KINDS", "SimFeed", "SimFeedConfig", "SimFeedServer"]


def _handler_for(feed: SimFeed, stopping: threading.Event) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"  # keep-alive, so clients can reuse connections as with the real API
        disable_nagle_algorithm = True  # headers and body go out in separate writes; Nagle would add ~40 ms
        wbufsize = 1 << 16  # one buffered write per response (flushed by the stdlib after each request)

        def _serve(self) -> None:
            length = int(self.headers.get("Content-Length") or 0)
            body = self.rfile.read(length) if length else b""
            peer = "%s:%s" % self.client_address[:2]
            response: SimResponse = feed.handle(self.command, self.path, dict(self.headers.items()), body, peer)
            with feed.holding(response):
                if response.hold_seconds > 0 and stopping.wait(response.hold_seconds):
                    response.drop = True  # shutting down: do not finish a held request
            if response.drop:
                self.close_connection = True
                try:
                    self.connection.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass
                return
            self.send_response(response.status)
            for name, value in response.headers.items():
                self.send_header(name, value)
            self.send_header("Content-Length", str(len(response.body)))
            self.end_headers()
            self.wfile.write(response.body)

        do_GET = do_POST = _serve

        def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - the stdlib's signature
            pass  # one line per request would flood `racing sim` and the test output

    return Handler


class SimFeedServer:
    """The simulated feed on a socket, served from a background thread; usable as a context manager."""

    def __init__(
        self,
        config: SimFeedConfig | None = None,
        host: str = "127.0.0.1",
        port: int = 0,
        now: Callable[[], dt.datetime] | None = None,
    ) -> None:
        self.feed = SimFeed(config or SimFeedConfig(), now=now)
        self._stopping = threading.Event()
        self._server = ThreadingHTTPServer((host, port), _handler_for(self.feed, self._stopping))
        self._server.daemon_threads = True
        self._thread: threading.Thread | None = None

    @property
    def root_url(self) -> str:
        host, port = self._server.server_address[:2]
        return f"http://{host}:{port}"

    @property
    def base_url(self) -> str:
        """What `TAB_API_BASE_URL` should be to use this feed."""
        return self.root_url + API_PREFIX

    def start(self) -> SimFeedServer:
        """Serve from a background thread; a second call (`with feed.start() as server:`) changes nothing. A second
        serving thread would outlive stop(), which ends one, and spin at a full core on the closed socket."""
        if self._thread is not None:
            return self
        self._thread = threading.Thread(target=self._server.serve_forever, kwargs={"poll_interval": 0.1},
                                        name="sim-tab-feed", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stopping.set()
        if self._thread is not None:
            self._server.shutdown()
            self._thread.join(timeout=5)
            self._thread = None
        self._server.server_close()

    def stats(self) -> dict[str, Any]:
        return self.feed.stats()

    def serve_until(self, stop: threading.Event) -> None:
        """Serve until `stop` is set (the CLI sets it from SIGINT/SIGTERM)."""
        self.start()
        while not stop.wait(0.2):
            time.sleep(0)
        self.stop()

    def __enter__(self) -> SimFeedServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
