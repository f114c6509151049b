"""Start and stop the local stack: embedded Postgres, migrations, the simulated TAB feed and `dagster dev`.

`make run` uses it in the foreground; the live-stack tests use the same class on free ports, so what the tests
prove is what a newcomer runs.
"""

from __future__ import annotations

import os
import random
import shlex
import shutil
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path

import httpx

from local_stack.code_server_watch import CodeServerWatch
from local_stack.embedded_postgres import STACK_DATABASES, client_bin_dir, ensure_database, start_embedded_postgres
from orchestration_core.postgres import psycopg2_url
from orchestration_core.settings import CODE_SERVER_HEARTBEAT_TTL_SECONDS

REPO_ROOT = Path(__file__).resolve().parent.parent
STOP_GRACE_SECONDS = 20.0


EPHEMERAL_PORTS = Path("/proc/sys/net/ipv4/ip_local_port_range")
LOWEST_PICKED_PORT = 20000
_PORT_PICKER = random.SystemRandom()  # never the seeded global generator: two processes must not pick alike


def ephemeral_port_range() -> tuple[int, int]:
    """The ports the kernel hands out for bind(0) and outgoing connections (Linux default 32768-60999)."""
    try:
        low, high = (int(part) for part in EPHEMERAL_PORTS.read_text().split())
        return low, high
    except (OSError, ValueError):
        return 32768, 60999


def free_port() -> int:
    """A TCP port on 127.0.0.1 that is free right now, picked below the kernel's ephemeral range.

    A port handed to a process that binds it seconds later (the stack's webserver, feed and API) must not be given
    to anyone else meanwhile: the kernel never hands out a port below its ephemeral range for bind(0) or an outgoing
    connection, so only another pick like this one could take it (tests run side by side, each worker picking).
    """
    low, _ = ephemeral_port_range()
    if low - LOWEST_PICKED_PORT >= 1000:
        for _ in range(50):
            port = _PORT_PICKER.randrange(LOWEST_PICKED_PORT, low)
            with socket.socket() as sock:
                try:
                    sock.bind(("127.0.0.1", port))
                except OSError:
                    continue  # in use
                return port
    with socket.socket() as sock:  # an unusual port range: let the kernel choose
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


# What `source .local/env` gives a second terminal: every variable the `racing`, `maintenance` and `dagster` commands
# read, pointing at the running stack (present only when the stack sets them).
ENV_FILE_VARIABLES = ("DAGSTER_HOME", "DAGSTER_POSTGRES_URL", "RACING_DATABASE_URL", "MAINTENANCE_DATABASE_URL",
                      "TAB_API_BASE_URL", "RACING_EXPORT_DIR", "DAGSTER_UI_URL", "RACING_TIMEZONE",
                      "MAINTENANCE_TIMEZONE", "SCHEDULER_API_KEY")


def env_file_text(env: Mapping[str, str], names: Iterable[str]) -> str:
    """Pure: `export NAME=value` lines (shell-quoted) for each of `names` set in `env`."""
    lines = [f"export {name}={shlex.quote(env[name])}" for name in dict.fromkeys(names) if env.get(name)]
    return "# Written by `make run` for the stack it serves: `source .local/env` in another terminal.\n" + \
        "\n".join(lines) + "\n"


def write_private_file(path: Path, text: str) -> None:
    """Write `text` readable by its owner only (0600): the env file carries database URLs with their passwords."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    os.fchmod(fd, 0o600)  # an older file keeps its mode through O_CREAT
    with os.fdopen(fd, "w") as handle:
        handle.write(text)


# `dagster dev` starts each location's code server through `dagster code-server start`, whose server reads its heartbeat
# TTL from this variable (orchestration_core/settings.py says why it is long).
# The storage's variable (orchestration_core/pooled_storage.py, named here so this supervisor does not import Dagster):
# every process of `dagster dev` keeps one connection per storage. They share one environment, so its run workers keep
# theirs too, for as long as they run. Opened per call, the idle stack's daemon made ~18 new Postgres backends a
# second, 42% of the idle stack's CPU (BENCHMARKS.md "Daemon storage").
STORAGE_KEEP_CONNECTIONS_VARIABLE = "DAGSTER_STORAGE_KEEP_CONNECTIONS"
DAGSTER_DEV_ENV = {"DAGSTER_GRPC_PROXY_HEARTBEAT_TTL_SECONDS": str(CODE_SERVER_HEARTBEAT_TTL_SECONDS),
                   STORAGE_KEEP_CONNECTIONS_VARIABLE: "1"}

# What `dagster dev` prints at start that says nothing to a user of this stack, kept off its console:
# - its own notice that `dg dev` supersedes it (a SupersessionWarning; the message only, never all warnings);
# - INFO lines of the daemon and webserver (every sensor evaluation, "Launching Dagster services"): `--log-level
#   warning` keeps their warnings and errors, and the UI shows every tick and run;
# - "Found a dagster instance configuration value (dagster.yaml) in the current folder": it starts in DAGSTER_HOME,
#   where its dagster.yaml is (workspace.yaml's paths are relative to that file, not to the current folder).
DAGSTER_DEV_WARNING_FILTERS = ("ignore:Function `dev_command` is superseded",)
DAGSTER_DEV_LOG_LEVEL = "warning"


def dagster_dev_warnings(environ: Mapping[str, str]) -> str:
    """PYTHONWARNINGS for `dagster dev` and its children: the user's own filters, then the stack's."""
    return ",".join(filter(None, (environ.get("PYTHONWARNINGS", ""), *DAGSTER_DEV_WARNING_FILTERS)))


def wait_for_http(url: str, timeout: float, process: subprocess.Popen | None = None) -> None:
    """Poll `url` until it answers (any status below 500), failing early if `process` died."""
    deadline = time.monotonic() + timeout
    with httpx.Client(timeout=2.0) as client:  # one client: each new one loads the CA bundle (~50 ms of CPU)
        while time.monotonic() < deadline:
            if process is not None and process.poll() is not None:
                raise RuntimeError(f"process {process.args!r} exited with {process.returncode} before {url} answered")
            try:
                if client.get(url).status_code < 500:
                    return
            except httpx.HTTPError:
                pass
            time.sleep(0.5)
    raise TimeoutError(f"{url} did not answer within {timeout:.0f} s")


def backup_client_env(server_url: str, *, embedded: bool, environ: Mapping[str, str]) -> dict[str, str]:
    """The seeded Postgres backup dumps the embedded server with that server's own client (Debian's pg_dump is older
    than it and refuses); a server of the user's own, or a folder the user named, is left to the user's setting."""
    if not embedded or "MAINTENANCE_PG_BIN_DIR" in environ:
        return {}
    return {"MAINTENANCE_PG_BIN_DIR": str(client_bin_dir(server_url))}


@dataclass
class StackOptions:
    """Where the stack keeps its data and which ports it serves on."""

    data_dir: Path = REPO_ROOT / ".local"
    dagster_port: int = 3000
    sim_port: int = 8765
    api_port: int = 8090
    host: str = "127.0.0.1"
    sim_args: list[str] = field(default_factory=list)
    # An external Postgres server URL; None starts the embedded one under data_dir.
    postgres_url: str | None = None
    start_api: bool = True
    # The control API's key; None starts it in its loudly insecure dev mode (what `make run` does).
    api_key: str | None = None
    extra_env: dict[str, str] = field(default_factory=dict)


class LocalStack:
    """The processes of the local stack, stopped together (no orphaned Postgres, daemon or run workers)."""

    def __init__(self, options: StackOptions) -> None:
        self.options = options
        self.env: dict[str, str] = {}
        self.processes: dict[str, subprocess.Popen] = {}
        self.code_server_watch: CodeServerWatch | None = None
        self._postgres = None

    @property
    def dagster_url(self) -> str:
        return f"http://{self.options.host}:{self.options.dagster_port}"

    @property
    def sim_base_url(self) -> str:
        return f"http://{self.options.host}:{self.options.sim_port}/affiliates/v1/racing"

    @property
    def api_url(self) -> str:
        return f"http://{self.options.host}:{self.options.api_port}"

    @property
    def env_file(self) -> Path:
        return self.options.data_dir / "env"

    def start(self, *, wait: bool = True) -> None:
        opts = self.options
        opts.data_dir.mkdir(parents=True, exist_ok=True)
        server_url = opts.postgres_url or self._start_postgres()
        dagster_home = opts.data_dir / "dagster_home"
        dagster_home.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(REPO_ROOT / "dagster.yaml", dagster_home / "dagster.yaml")
        urls = {name: ensure_database(server_url, name) for name in STACK_DATABASES}
        self.env = {
            **os.environ,
            "DAGSTER_HOME": str(dagster_home),
            "DAGSTER_POSTGRES_URL": urls["dagster"],
            "RACING_DATABASE_URL": os.environ.get("RACING_DATABASE_URL", urls["racing"]),
            "MAINTENANCE_DATABASE_URL": os.environ.get("MAINTENANCE_DATABASE_URL", urls["maintenance"]),
            "TAB_API_BASE_URL": self.sim_base_url,
            "RACING_EXPORT_DIR": os.environ.get("RACING_EXPORT_DIR", str(opts.data_dir / "exports")),
            "DAGSTER_UI_URL": self.dagster_url,  # run links in the control API's /executions
            **backup_client_env(server_url, embedded=not opts.postgres_url, environ=os.environ),
            **DAGSTER_DEV_ENV,
            **opts.extra_env,
        }
        self._migrate()
        self._spawn("sim", [sys.executable, "-m", "racing_orchestration.cli", "sim", "--host", opts.host,
                            "--port", str(opts.sim_port), *opts.sim_args])
        self._spawn("dagster", [sys.executable, "-m", "dagster", "dev", "-w", str(REPO_ROOT / "workspace.yaml"),
                                "-h", opts.host, "-p", str(opts.dagster_port), "--log-level", DAGSTER_DEV_LOG_LEVEL],
                    env={**self.env, "PYTHONWARNINGS": dagster_dev_warnings(self.env)}, cwd=dagster_home)
        self.code_server_watch = CodeServerWatch(urls["dagster"], self.processes["dagster"].pid,
                                                 report=lambda message: print(message, flush=True))
        self.code_server_watch.start()
        if opts.start_api and self._api_available():
            auth = ["--insecure-dev"] if opts.api_key is None else []
            if opts.api_key is not None:
                self.env["SCHEDULER_API_KEY"] = opts.api_key
            self._spawn("api", [sys.executable, "-m", "control_api", "--host", opts.host,
                                "--port", str(opts.api_port), *auth])
        write_private_file(self.env_file, env_file_text(self.env, (*ENV_FILE_VARIABLES, *opts.extra_env)))
        if wait:
            # Generous: each wait ends early if its process exits. On a host at load ~30 (the full suite beside an
            # image build) the feed took more than 30 s to answer and the API more than 60.
            wait_for_http(f"{self.sim_base_url}/meetings?limit=1", 120, self.processes["sim"])
            wait_for_http(f"{self.dagster_url}/server_info", 180, self.processes["dagster"])
            if "api" in self.processes:
                wait_for_http(f"{self.api_url}/health", 180, self.processes["api"])

    def _start_postgres(self) -> str:
        self._postgres = start_embedded_postgres(self.options.data_dir / "pgdata")
        return psycopg2_url(self._postgres.get_uri())

    def _migrate(self) -> None:
        for module in ("racing_orchestration.cli", "maintenance_jobs.cli"):
            command = [sys.executable, "-m", module, "db", "upgrade"]
            if module == "maintenance_jobs.cli" and not self._module_exists("maintenance_jobs.cli"):
                continue
            subprocess.run(command, env=self.env, cwd=REPO_ROOT, check=True)

    @staticmethod
    def _module_exists(name: str) -> bool:
        import importlib.util

        return importlib.util.find_spec(name) is not None

    def _api_available(self) -> bool:
        return self._module_exists("control_api")

    def _spawn(self, name: str, command: list[str], env: Mapping[str, str] | None = None,
               cwd: Path = REPO_ROOT) -> None:
        # Each child leads its own process group, so stopping it also stops what it spawned (webserver, daemon,
        # code servers, run workers) and a Ctrl-C in the terminal reaches only this supervisor.
        self.processes[name] = subprocess.Popen(command, env=self.env if env is None else env, cwd=cwd,
                                                start_new_session=True)

    def stop(self) -> None:
        """Stop every child group (SIGINT, then SIGTERM, then SIGKILL) and then Postgres."""
        if self.code_server_watch is not None:
            self.code_server_watch.stop()
        for process in reversed(list(self.processes.values())):
            _stop_group(process)
        self.processes.clear()
        self.env_file.unlink(missing_ok=True)  # its URLs point at this stack only
        if self._postgres is not None:
            self._postgres.cleanup()
            self._postgres = None

    def __enter__(self) -> LocalStack:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()


def _stop_group(process: subprocess.Popen) -> None:
    """Escalate SIGINT -> SIGTERM -> SIGKILL until the child's whole process group is gone."""
    for sig, grace in ((signal.SIGINT, STOP_GRACE_SECONDS), (signal.SIGTERM, 5.0), (signal.SIGKILL, 5.0)):
        if not _group_alive(process.pid):
            break
        os.killpg(process.pid, sig)
        deadline = time.monotonic() + grace
        while time.monotonic() < deadline and _group_alive(process.pid):
            time.sleep(0.2)
            process.poll()  # reap the leader so it does not linger as a zombie
    process.poll()


def _group_alive(pgid: int) -> bool:
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return False
    return True
