"""The front of the Dagster webserver (deploy/front): the real nginx (Debian's `nginx` package; make test installs it),
started by the repository's deploy/front/entrypoint.sh with its nginx.conf.template, in front of a stand-in webserver
on loopback that records every request reaching it and echoes websocket messages. Probed over sockets from an
attacker's side: what a page the operator opens can send (an <img> GET, a form POST, a cross-site fetch or websocket,
a DNS-rebound name), and what a client without the login can send. A refused request must never reach the webserver.
"""

from __future__ import annotations

import base64
import hashlib
import json
import os
import shutil
import socket
import socketserver
import subprocess
import tempfile
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from local_stack.stack import free_port

pytestmark = pytest.mark.unit

REPO_ROOT = Path(__file__).resolve().parents[2]
ENTRYPOINT = REPO_ROOT / "deploy" / "front" / "entrypoint.sh"
USER, PASSWORD = "operator", "correct horse battery staple"
WEBSOCKET_GUID = "258EAFA5-E914-47DA-95CA-C5AB0DC85B11"
MUTATION = "/graphql?query=mutation%7BlaunchRun(executionParams%3A%7B%7D)%7B__typename%7D%7D"
NOBODY = 65534  # nginx runs as a non-root user in its image; as root here it would hand its workers to `nobody`


def nginx_binary() -> str:
    """Debian's nginx; without it the test fails (never skips) and says how to install it."""
    found = shutil.which("nginx") or shutil.which("nginx", path="/usr/sbin:/sbin")
    if found is None:
        pytest.fail("nginx not found: install Debian's nginx package (apt-get install --no-install-recommends nginx); "
                    "make test does this")
    return found


def basic(user: str, password: str) -> str:
    return "Basic " + base64.b64encode(f"{user}:{password}".encode()).decode()


def websocket_accept(key: str) -> str:
    return base64.b64encode(hashlib.sha1((key + WEBSOCKET_GUID).encode()).digest()).decode()


def text_frame(payload: bytes, mask: bytes | None) -> bytes:
    """One unfragmented websocket text frame (payloads under 126 bytes); clients mask, servers do not."""
    assert len(payload) < 126
    if mask is None:
        return bytes([0x81, len(payload)]) + payload
    return bytes([0x81, 0x80 | len(payload)]) + mask + bytes(b ^ mask[i % 4] for i, b in enumerate(payload))


def read_frame(sock: socket.socket) -> bytes:
    head = read_exactly(sock, 2)
    length = head[1] & 0x7F
    mask = read_exactly(sock, 4) if head[1] & 0x80 else None
    payload = read_exactly(sock, length)
    return payload if mask is None else bytes(b ^ mask[i % 4] for i, b in enumerate(payload))


def read_exactly(sock: socket.socket, count: int) -> bytes:
    data = b""
    while len(data) < count:
        chunk = sock.recv(count - len(data))
        if not chunk:
            raise ConnectionError(f"closed after {len(data)} of {count} bytes")
        data += chunk
    return data


def read_head(sock: socket.socket) -> tuple[str, dict[str, str], bytes]:
    """The request or status line, the headers (lower-case names) and what was read past them."""
    data = b""
    while b"\r\n\r\n" not in data:
        chunk = sock.recv(4096)
        if not chunk:
            raise ConnectionError(f"closed before the end of the head: {data!r}")
        data += chunk
    head, rest = data.split(b"\r\n\r\n", 1)
    first, *lines = head.decode("latin-1").split("\r\n")
    headers = {}
    for line in lines:
        name, _, value = line.partition(":")
        headers[name.strip().lower()] = value.strip()
    return first, headers, rest


@dataclass
class Seen:
    method: str
    target: str
    headers: dict[str, str]
    body: bytes


@dataclass
class StandInWebserver:
    """A loopback HTTP and websocket server in the webserver's place: records each request, answers 200 with a small
    JSON body, accepts websocket upgrades (101, the computed Sec-WebSocket-Accept) and echoes one text message."""

    seen: list[Seen] = field(default_factory=list)

    def serve(self) -> int:
        stand_in = self

        class Handler(socketserver.BaseRequestHandler):
            def handle(self) -> None:
                sock: socket.socket = self.request
                sock.settimeout(10)
                first, headers, rest = read_head(sock)
                method, target, _ = first.split(" ", 2)
                body = rest + read_exactly(sock, int(headers.get("content-length", "0")) - len(rest))
                stand_in.seen.append(Seen(method, target, headers, body))
                if headers.get("upgrade", "").lower() == "websocket":
                    sock.sendall(("HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
                                  f"Sec-WebSocket-Accept: {websocket_accept(headers['sec-websocket-key'])}\r\n"
                                  "Sec-WebSocket-Protocol: graphql-ws\r\n\r\n").encode())
                    sock.sendall(text_frame(b"echo: " + read_frame(sock), mask=None))
                    return
                answer = json.dumps({"data": {"stand_in": True}}).encode()
                sock.sendall(b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nConnection: close\r\n"
                             + f"Content-Length: {len(answer)}\r\n\r\n".encode() + answer)

        server = socketserver.ThreadingTCPServer(("127.0.0.1", 0), Handler)
        server.daemon_threads = True
        threading.Thread(target=server.serve_forever, daemon=True).start()
        self.server = server
        return server.server_address[1]

    def reached(self, probe: str) -> bool:
        return any(seen.headers.get("x-probe") == probe for seen in self.seen)


@dataclass
class Front:
    port: int
    health_port: int
    webserver: StandInWebserver
    run_dir: Path

    @property
    def host(self) -> str:
        return f"127.0.0.1:{self.port}"

    @property
    def origin(self) -> str:
        return f"http://{self.host}"


def front_environment(run_dir: Path, port: int, health_port: int, upstream_port: int) -> dict[str, str]:
    return {
        "PATH": f"{os.environ.get('PATH', '')}:/usr/sbin:/sbin",
        "FRONT_USER": USER,
        "FRONT_PASSWORD": PASSWORD,
        "FRONT_PUBLIC_ORIGIN": f"http://127.0.0.1:{port}",
        "FRONT_UPSTREAM": f"127.0.0.1:{upstream_port}",
        "FRONT_LISTEN": f"127.0.0.1:{port}",
        "FRONT_HEALTH_LISTEN": f"127.0.0.1:{health_port}",
        "FRONT_RESOLVER": "127.0.0.1",
        "FRONT_RUN_DIR": str(run_dir),
    }


def as_image_user() -> list[str]:
    """Run as the unprivileged user the image runs as (nginx keeps its workers as the user that started it)."""
    return ["setpriv", f"--reuid={NOBODY}", f"--regid={NOBODY}", "--clear-groups"] if os.geteuid() == 0 else []


def run_dir_for_image_user() -> Path:
    run_dir = Path(tempfile.mkdtemp(prefix="front-"))
    run_dir.chmod(0o700)
    if os.geteuid() == 0:
        os.chown(run_dir, NOBODY, NOBODY)
    return run_dir


@pytest.fixture(scope="module")
def front() -> Iterator[Front]:
    nginx_binary()
    webserver = StandInWebserver()
    upstream_port = webserver.serve()
    port, health_port = free_port(), free_port()
    run_dir = run_dir_for_image_user()
    log = (run_dir.parent / f"{run_dir.name}.log").open("w+")
    process = subprocess.Popen([*as_image_user(), "sh", str(ENTRYPOINT)], stdout=log, stderr=subprocess.STDOUT,
                               env=front_environment(run_dir, port, health_port, upstream_port))
    try:
        deadline = time.monotonic() + 15
        while True:
            if process.poll() is not None:
                log.seek(0)
                pytest.fail(f"the front exited {process.returncode}:\n{log.read()}")
            try:
                status, _, _ = exchange(health_port, f"GET /health HTTP/1.1\r\nHost: 127.0.0.1:{health_port}\r\n"
                                                     "Connection: close\r\n\r\n".encode())
                if status == 200:
                    break
            except OSError:
                pass
            if time.monotonic() > deadline:
                log.seek(0)
                pytest.fail(f"the front did not answer its health check within 15 s:\n{log.read()}")
            time.sleep(0.1)
        yield Front(port, health_port, webserver, run_dir)
    finally:
        process.terminate()
        process.wait(timeout=10)
        webserver.server.shutdown()
        log.close()
        shutil.rmtree(run_dir, ignore_errors=True)


def exchange(port: int, request: bytes) -> tuple[int, dict[str, str], bytes]:
    """Send one raw request; the status, headers and body of the answer (the connection closes after it; the answer
    to a HEAD has no body)."""
    with socket.create_connection(("127.0.0.1", port), timeout=10) as sock:
        sock.sendall(request)
        first, headers, rest = read_head(sock)
        status = int(first.split(" ")[1])
        if status == 101 or request.startswith(b"HEAD "):
            return status, headers, rest
        length = int(headers.get("content-length", "0"))
        return status, headers, rest + (read_exactly(sock, length - len(rest)) if length > len(rest) else b"")


def raw_request(method: str, target: str, headers: dict[str, str | None], body: bytes = b"",
                version: str = "HTTP/1.1") -> bytes:
    lines = [f"{method} {target} {version}"]
    lines += [f"{name}: {value}" for name, value in headers.items() if value is not None]
    if body or method in {"POST", "PUT"}:
        lines.append(f"Content-Length: {len(body)}")
    if "Connection" not in headers:
        lines.append("Connection: close")
    return ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1") + body


LAUNCH = json.dumps({"query": "mutation LaunchRun { launchRun(executionParams: {}) { __typename } }"}).encode()
SUBSCRIBE = {"Upgrade": "websocket", "Connection": "Upgrade", "Sec-WebSocket-Version": "13",
             "Sec-WebSocket-Key": "dGhlIHNhbXBsZSBub25jZQ==", "Sec-WebSocket-Protocol": "graphql-ws"}
JSON_POST = {"method": "POST", "target": "/graphql?op=LaunchRun", "body": LAUNCH,
             "headers": {"Content-Type": "application/json"}}
# What the browser adds on its own: the page's Host and Origin, and the cached login on same-origin requests.
HOST, ORIGIN, LOGIN = "{host}", "{origin}", basic(USER, PASSWORD)


def probe(method: str, target: str, headers: dict[str, str | None] | None = None, body: bytes = b"",
          version: str = "HTTP/1.1") -> dict:
    return {"method": method, "target": target, "headers": {"Host": HOST, "Origin": ORIGIN, "Authorization": LOGIN,
                                                            **(headers or {})}, "body": body, "version": version}


def json_post(**headers: str | None) -> dict:
    return probe("POST", "/graphql?op=LaunchRun", {"Content-Type": "application/json", **headers}, LAUNCH)


# (what the attacker tries, the request, the front's answer). Every row but the last ones is refused.
PROBES = [
    # An <img src> or link on any page: a GET carrying a mutation, with or without the login the browser caches.
    ("get-mutation-img", probe("GET", MUTATION, {"Origin": None}), 405),
    ("get-mutation-without-login", probe("GET", MUTATION, {"Origin": None, "Authorization": None}), 405),
    ("get-mutation-encoded-path", probe("GET", MUTATION.replace("/graphql", "/%67raphql"), {"Origin": None}), 405),
    ("get-mutation-double-slash", probe("GET", "/" + MUTATION, {"Origin": None}), 405),
    ("get-mutation-trailing-slash", probe("GET", MUTATION.replace("/graphql", "/graphql/"), {"Origin": None}), 405),
    ("get-query", probe("GET", "/graphql?query=%7Bversion%7D", {"Origin": None}), 405),
    ("head-graphql", probe("HEAD", "/graphql?query=%7Bversion%7D", {"Origin": None}), 405),
    ("put-json", probe("PUT", "/graphql", {"Content-Type": "application/json"}, LAUNCH), 405),
    ("post-json-with-upgrade", json_post(Upgrade="websocket"), 405),
    # A form on the operator's own origin (or a same-origin page): a body type forms can send.
    ("post-text-plain", probe("POST", "/graphql", {"Content-Type": "text/plain"}, LAUNCH), 415),
    ("post-urlencoded", probe("POST", "/graphql", {"Content-Type": "application/x-www-form-urlencoded"},
                              b"query=mutation%7BlaunchRun%7D"), 415),
    ("post-multipart", probe("POST", "/graphql", {"Content-Type": "multipart/form-data; boundary=x"},
                             b"--x\r\nContent-Disposition: form-data; name=query\r\n\r\nmutation{}\r\n--x--\r\n"), 415),
    ("post-no-content-type", probe("POST", "/graphql", {}, LAUNCH), 415),
    ("post-json-lookalike-type", probe("POST", "/graphql", {"Content-Type": "application/jsonp"}, LAUNCH), 415),
    ("post-text-plain-trailing-slash", probe("POST", "/graphql/", {"Content-Type": "text/plain"}, LAUNCH), 415),
    # A cross-site page: fetch/XHR or a form from its own origin (browsers always send Origin then).
    ("post-json-foreign-origin", json_post(Origin="http://evil.example"), 403),
    ("post-json-null-origin", json_post(Origin="null"), 403),
    ("post-json-lookalike-origin", json_post(Origin="http://{host}.evil.example"), 403),
    ("post-json-https-origin", json_post(Origin="https://{host}"), 403),
    ("post-json-other-port-origin", json_post(Origin="http://127.0.0.1:1"), 403),
    ("websocket-foreign-origin", probe("GET", "/graphql", {**SUBSCRIBE, "Origin": "http://evil.example"}), 403),
    ("report-asset-foreign-origin", probe("POST", "/report_asset_materialization/racing", {
        "Origin": "http://evil.example", "Content-Type": "application/x-www-form-urlencoded"}, b"x=1"), 403),
    # DNS rebinding: the attacker's name now points at 127.0.0.1; the browser sends the attacker's Host (and its
    # Origin, which is the same name).
    ("rebound-host", json_post(Host="rebind.evil.example:{port}", Origin="http://rebind.evil.example:{port}"), 421),
    ("rebound-host-same-origin-get", probe("GET", "/", {"Host": "rebind.evil.example:{port}", "Origin": None}), 421),
    ("localhost-host", json_post(Host="localhost:{port}", Origin=None), 421),
    ("host-without-port", json_post(Host="127.0.0.1", Origin=None), 421),
    ("no-host-http-1.0", probe("GET", "/", {"Host": None, "Origin": None}, version="HTTP/1.0"), 421),
    # No login: anything on the network path to the front that is not the operator.
    ("json-post-without-login", json_post(Authorization=None), 401),
    ("json-post-wrong-password", json_post(Authorization=basic(USER, "guess")), 401),
    ("json-post-wrong-user", json_post(Authorization=basic("admin", PASSWORD)), 401),
    ("json-post-bearer", json_post(Authorization="Bearer " + PASSWORD), 401),
    ("ui-page-without-login", probe("GET", "/runs", {"Origin": None, "Authorization": None}), 401),
    ("logs-without-login", probe("GET", "/logs/run/step/out", {"Origin": None, "Authorization": None}), 401),
    ("websocket-without-login", probe("GET", "/graphql", {**SUBSCRIBE, "Authorization": None}), 401),
    # What the UI and the project's own clients send: passed to the webserver.
    ("ui-json-post", json_post(), 200),
    ("ui-json-post-charset", json_post(**{"Content-Type": "application/json; charset=utf-8"}), 200),
    ("client-json-post-without-origin", json_post(Origin=None), 200),
    ("ui-page", probe("GET", "/runs/0f1e", {"Origin": None}), 200),
    ("ui-log-download", probe("GET", "/logs/run/step/out", {"Origin": None}), 200),
]


def render(value: str, front: Front) -> str:
    return value.replace("{host}", front.host).replace("{origin}", front.origin).replace("{port}", str(front.port))


@pytest.mark.parametrize(("name", "request_spec", "status"), PROBES, ids=[row[0] for row in PROBES])
def test_probe(front: Front, name: str, request_spec: dict, status: int) -> None:
    headers = {key: None if value is None else render(value, front) for key, value in request_spec["headers"].items()}
    request = raw_request(request_spec["method"], request_spec["target"], {**headers, "X-Probe": name},
                          request_spec["body"], request_spec["version"])
    answer, answer_headers, body = exchange(front.port, request)
    assert answer == status, (name, answer, body[:300])
    if status == 200:
        assert front.webserver.reached(name), f"{name}: answered 200 but the webserver never saw it"
        [seen] = [s for s in front.webserver.seen if s.headers.get("x-probe") == name]
        assert "authorization" not in seen.headers, "the login was passed on to the webserver"
        assert seen.body == request_spec["body"] and json.loads(body) == {"data": {"stand_in": True}}
    else:
        assert not front.webserver.reached(name), f"{name}: refused with {answer} but reached the webserver"
    if status != 401:  # the framing headers are on every answer nginx makes, refusals included
        assert answer_headers.get("x-frame-options") == "DENY"


def test_the_probe_table_covers_every_refusal_and_the_ui() -> None:
    """Every refusal the front makes has rows, and the UI's own requests pass."""
    counts = {status: sum(1 for row in PROBES if row[2] == status) for status in {row[2] for row in PROBES}}
    assert counts.keys() == {200, 401, 403, 405, 415, 421}
    assert min(counts.values()) >= 4 and len(PROBES) >= 13


def test_the_ui_websocket_passes_end_to_end(front: Front) -> None:
    """The UI's subscriptions: the upgrade reaches the webserver with its Upgrade/Connection headers, the 101 comes
    back with the webserver's Sec-WebSocket-Accept, and a message goes through both ways."""
    headers = {"Host": front.host, "Origin": front.origin, "Authorization": LOGIN, **SUBSCRIBE,
               "X-Probe": "websocket-e2e"}
    lines = ["GET /graphql HTTP/1.1", *(f"{name}: {value}" for name, value in headers.items())]
    with socket.create_connection(("127.0.0.1", front.port), timeout=10) as sock:
        sock.sendall(("\r\n".join(lines) + "\r\n\r\n").encode())
        first, answer_headers, rest = read_head(sock)
        assert first.startswith("HTTP/1.1 101"), first
        assert answer_headers["sec-websocket-accept"] == websocket_accept(SUBSCRIBE["Sec-WebSocket-Key"])
        assert answer_headers["sec-websocket-protocol"] == "graphql-ws"
        assert rest == b""
        sock.sendall(text_frame(b'{"type":"connection_init"}', mask=b"\x01\x02\x03\x04"))
        assert read_frame(sock) == b'echo: {"type":"connection_init"}'
    [seen] = [s for s in front.webserver.seen if s.headers.get("x-probe") == "websocket-e2e"]
    assert seen.headers["upgrade"] == "websocket" and seen.headers["connection"].lower() == "upgrade"
    assert "authorization" not in seen.headers


def test_the_login_file_holds_a_hash_not_the_password(front: Front) -> None:
    text = (front.run_dir / "htpasswd").read_text()
    user, _, password_hash = text.strip().partition(":")
    assert user == USER and password_hash.startswith("$6$") and PASSWORD not in text
    assert (front.run_dir / "htpasswd").stat().st_mode & 0o077 == 0


def test_the_health_check_needs_no_login_and_serves_only_health(front: Front) -> None:
    request = "GET /health HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n".encode()
    assert exchange(front.health_port, request)[0] == 200
    assert exchange(front.health_port, request.replace(b"/health", b"/graphql"))[0] == 404


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"FRONT_PASSWORD": ""}, "FRONT_PASSWORD is empty"),
        ({"FRONT_USER": ""}, "FRONT_USER is empty"),
        ({"FRONT_USER": "a:b"}, "FRONT_USER must not contain"),
        ({"FRONT_PUBLIC_ORIGIN": "http://127.0.0.1:3000/"}, "FRONT_PUBLIC_ORIGIN must be"),
        ({"FRONT_PUBLIC_ORIGIN": "127.0.0.1:3000"}, "FRONT_PUBLIC_ORIGIN must be"),
        ({"FRONT_PUBLIC_ORIGIN": "http://Dagster.example"}, "FRONT_PUBLIC_ORIGIN must be"),
        ({"FRONT_UPSTREAM": "webserver:3000;evil"}, "unexpected character"),
    ],
)
def test_the_entrypoint_refuses_a_bad_setting(tmp_path: Path, change: dict, message: str) -> None:
    env = {**front_environment(tmp_path, free_port(), free_port(), free_port()), **change}
    done = subprocess.run(["sh", str(ENTRYPOINT)], env=env, capture_output=True, text=True, timeout=30)
    assert done.returncode == 64 and message in done.stderr, done.stderr
    assert not (tmp_path / "nginx.conf").exists()
