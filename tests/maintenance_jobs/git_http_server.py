"""A Gitea stand-in: `git http-backend` (CGI) behind a local HTTP server that demands `Authorization: token …`."""

from __future__ import annotations

import os
import subprocess
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from urllib.parse import urlsplit

HTTP_BACKEND = Path(subprocess.run(["git", "--exec-path"], capture_output=True, text=True, check=True).stdout.strip()) / "git-http-backend"


class GitHttpServer:
    """Serves bare repositories under `root` on 127.0.0.1; every request must carry the token header."""

    def __init__(self, root: Path, token: str) -> None:
        self.root = root
        self.token = token
        self.auth_headers_seen: list[str] = []
        self.requests_with_token_in_url = 0
        server = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args) -> None:  # keep test output quiet
                pass

            def do_GET(self) -> None:
                self._serve()

            def do_POST(self) -> None:
                self._serve()

            def _body(self) -> bytes:
                if self.headers.get("Transfer-Encoding", "").lower() == "chunked":
                    chunks = []
                    while size := int(self.rfile.readline().strip() or b"0", 16):
                        chunks.append(self.rfile.read(size))
                        self.rfile.readline()
                    self.rfile.readline()
                    return b"".join(chunks)
                return self.rfile.read(int(self.headers.get("Content-Length") or 0))

            def _serve(self) -> None:
                auth = self.headers.get("Authorization", "")
                server.auth_headers_seen.append(auth)
                if server.token in self.path:
                    server.requests_with_token_in_url += 1
                if auth != f"token {server.token}":
                    self.send_response(401)
                    self.send_header("WWW-Authenticate", 'Basic realm="gitea"')
                    self.send_header("Content-Length", "0")
                    self.end_headers()
                    return
                body = self._body()
                url = urlsplit(self.path)
                env = {
                    "PATH": os.environ.get("PATH", ""),
                    "GIT_PROJECT_ROOT": str(server.root),
                    "GIT_HTTP_EXPORT_ALL": "1",
                    "REMOTE_USER": "librarian",  # http-backend only allows pushes from an authenticated user
                    "REQUEST_METHOD": self.command,
                    "PATH_INFO": url.path,
                    "QUERY_STRING": url.query,
                    "CONTENT_TYPE": self.headers.get("Content-Type", ""),
                    "CONTENT_LENGTH": str(len(body)),
                    "HTTP_CONTENT_ENCODING": self.headers.get("Content-Encoding", ""),
                    "GIT_PROTOCOL": self.headers.get("Git-Protocol", ""),
                }
                done = subprocess.run([str(HTTP_BACKEND)], input=body, env=env, capture_output=True, check=False)
                head, _, payload = done.stdout.partition(b"\r\n\r\n")
                status = 200
                headers = []
                for line in head.decode().split("\r\n"):
                    if not line:
                        continue
                    key, _, value = line.partition(":")
                    if key.lower() == "status":
                        status = int(value.strip().split()[0])
                    else:
                        headers.append((key, value.strip()))
                self.send_response(status)
                for key, value in headers:
                    self.send_header(key, value)
                self.send_header("Content-Length", str(len(payload)))
                self.end_headers()
                self.wfile.write(payload)

        self._httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._thread = threading.Thread(target=self._httpd.serve_forever, daemon=True)

    @property
    def base_url(self) -> str:
        host, port = self._httpd.server_address[:2]
        return f"http://{host}:{port}"

    def __enter__(self) -> GitHttpServer:
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._httpd.shutdown()
        self._httpd.server_close()
