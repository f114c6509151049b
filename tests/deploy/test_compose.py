"""Static checks of docker-compose.yml and .env.example (no Docker engine here): the compose-spec schema, files the
compose file refers to, variables, healthchecks, pinned images, published ports and the Docker socket."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from tests.deploy.compose_model import (
    COMPOSE_FILE,
    ENV_EXAMPLE,
    REPO_ROOT,
    bind_mount_sources,
    env_example,
    image_tag_problem,
    interpolate,
    load_compose,
    network_members,
    network_peers,
    published_host_ip,
    service_networks,
    string_values,
    variables_used,
)

pytestmark = pytest.mark.unit

COMPOSE = load_compose()
COMPOSE_STRINGS = "\n".join(string_values(COMPOSE))
SERVICES: dict = COMPOSE["services"]
ONE_SHOT = {"migrate"}
STATEFUL = {"postgres", "prometheus", "alertmanager", "grafana"}
DOCKER_SOCKET = "/var/run/docker.sock"
DOCKERFILES = (REPO_ROOT / "deploy" / "Dockerfile.dagster", REPO_ROOT / "deploy" / "Dockerfile.user_code",
               REPO_ROOT / "deploy" / "Dockerfile.front")
# The daemon launches and monitors run containers; the webserver's Terminate button stops them.
SOCKET_USERS = {"daemon", "webserver"}


def _check_compose_schema(path: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "check_jsonschema", "--builtin-schema", "vendor.compose-spec", str(path)],
        capture_output=True, text=True, timeout=120,
    )


def test_compose_file_matches_the_compose_specification() -> None:
    result = _check_compose_schema(COMPOSE_FILE)
    assert result.returncode == 0, result.stdout + result.stderr


def test_schema_check_rejects_an_unknown_service_key(tmp_path: Path) -> None:
    # The validator resolves the anchors: a bad key in the shared user-code block shows up in every service using it.
    broken = COMPOSE_FILE.read_text().replace("  logging: *logging\n", "  logging: *logging\n  bogus_key: 1\n", 1)
    (tmp_path / "docker-compose.yml").write_text(broken)
    result = _check_compose_schema(tmp_path / "docker-compose.yml")
    assert result.returncode != 0
    assert "bogus_key" in result.stdout


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("${A}", {"A"}),
        ("${B:-x} ${C-y} ${D:?set D} ${E?e}", {"B", "C", "D", "E"}),
        ("$F and $$NOT_A_VARIABLE", {"F"}),  # `$$` is a literal dollar in compose
        ("postgresql://u:${PW:?set PW in .env}@postgres/db", {"PW"}),
    ],
)
def test_variables_used(text: str, expected: set[str]) -> None:
    assert variables_used(text) == expected


def test_every_compose_variable_is_documented_in_env_example() -> None:
    missing = variables_used(COMPOSE_STRINGS) - env_example().keys()
    assert not missing, f"variables used in docker-compose.yml but missing from .env.example: {sorted(missing)}"


def test_env_example_documents_each_variable_and_lists_no_unused_ones() -> None:
    used = variables_used(COMPOSE_STRINGS)
    commented = False  # a comment opens a block of variables it describes
    for line in ENV_EXAMPLE.read_text().splitlines():
        if line.startswith("#"):
            commented = True
        elif not line.strip():
            commented = False
        else:
            name = line.split("=", 1)[0]
            assert name in used, f".env.example lists {name}, which docker-compose.yml never reads"
            assert commented, f".env.example: {name} has no comment describing it"


def test_env_example_holds_no_secrets() -> None:
    secrets = ("POSTGRES_PASSWORD", "DAGSTER_DB_PASSWORD", "RACING_DB_PASSWORD", "MAINTENANCE_DB_PASSWORD",
               "SCHEDULER_API_KEY", "GRAFANA_ADMIN_PASSWORD", "GITEA_TOKEN", "FRONT_PASSWORD")
    values = env_example()
    assert {name: values[name] for name in secrets} == dict.fromkeys(secrets, "")


def test_compose_refuses_to_start_without_the_required_secrets() -> None:
    with pytest.raises(ValueError, match=r"_PASSWORD: set \w+_PASSWORD in .env"):
        interpolate(COMPOSE_STRINGS, env_example())
    filled = {**env_example(), **{name: "x" for name, value in env_example().items() if value == ""}}
    assert "${" not in interpolate(COMPOSE_STRINGS, filled)


def test_no_hard_coded_passwords() -> None:
    for name, service in SERVICES.items():
        for key, value in (service.get("environment") or {}).items():
            value = str(value)
            if any(word in key for word in ("PASSWORD", "TOKEN", "API_KEY")):
                assert value.startswith("${"), f"{name}.{key} is not taken from .env"
            if credentials := re.search(r"://[^:/@]+:([^@]*)@", value):
                assert credentials.group(1).startswith("${"), f"{name}.{key} has a password in the URL"


def test_build_contexts_dockerfiles_and_their_copy_sources_exist() -> None:
    built = {name: s["build"] for name, s in SERVICES.items() if "build" in s}
    assert built.keys() >= {"migrate", "code-racing", "code-maintenance", "api", "webserver", "daemon", "front"}
    for name, build in built.items():
        context = REPO_ROOT / build["context"]
        dockerfile = context / build["dockerfile"]
        assert context.is_dir(), f"{name}: build context {context} missing"
        assert dockerfile.is_file(), f"{name}: {dockerfile} missing"
        for line in dockerfile.read_text().splitlines():
            words = line.split()
            if words[:1] == ["COPY"] and not any(word.startswith("--from") for word in words):
                for source in (w for w in words[1:-1] if not w.startswith("--")):
                    assert (context / source).exists(), f"{dockerfile.name}: COPY source {source} missing"


def test_every_bind_mounted_file_exists() -> None:
    for name, service in SERVICES.items():
        for source in bind_mount_sources(service):
            if source == DOCKER_SOCKET:
                continue
            assert (REPO_ROOT / source).exists(), f"{name}: bind mount {source} does not exist"


def test_docker_socket_only_where_runs_are_launched_or_stopped() -> None:
    users = {name for name, service in SERVICES.items() if DOCKER_SOCKET in bind_mount_sources(service)}
    assert users == SOCKET_USERS


@pytest.mark.parametrize(
    ("image", "problem"),
    [
        ("postgres:16.4-alpine", None),
        ("racing-orchestration/user-code:0.1.0", None),
        ("registry:5000/app", "no tag"),
        ("grafana/grafana", "no tag"),
        ("prom/prometheus:latest", "latest"),
        ("postgres@sha256:" + "a" * 64, None),
    ],
)
def test_image_tag_problem(image: str, problem: str | None) -> None:
    found = image_tag_problem(image)
    assert (found is None) if problem is None else (problem in found)


def test_every_image_is_pinned() -> None:
    env = {**env_example(), **{name: "x" for name, value in env_example().items() if value == ""}}
    for name, service in SERVICES.items():
        image = interpolate(service["image"], env)
        assert image_tag_problem(image) is None, f"{name}: {image_tag_problem(image)}"
    for dockerfile in DOCKERFILES:
        for line in dockerfile.read_text().splitlines():
            if line.startswith("FROM "):
                assert image_tag_problem(line.split()[1]) is None, f"{dockerfile.name}: {line}"


@pytest.mark.parametrize(
    ("port", "host_ip"),
    [
        ("127.0.0.1:3000:3000", "127.0.0.1"),
        ("3000:3000", "0.0.0.0"),
        ("3000", "0.0.0.0"),
        ("[::1]:3000:3000", "::1"),
        ({"target": 3000, "published": 3000, "host_ip": "127.0.0.1"}, "127.0.0.1"),
        ({"target": 3000, "published": 3000}, "0.0.0.0"),
    ],
)
def test_published_host_ip(port: str | dict, host_ip: str) -> None:
    assert published_host_ip(port) == host_ip


def test_ports_are_published_on_loopback_only() -> None:
    # Prometheus and Alertmanager have no login; remote access goes through a tunnel (README "Remote access").
    published = {name: s.get("ports", []) for name, s in SERVICES.items() if s.get("ports")}
    assert "front" in published
    for name, ports in published.items():
        for port in ports:
            assert published_host_ip(port) == "127.0.0.1", f"{name} publishes {port} beyond localhost"
    assert not SERVICES["postgres"].get("ports"), "Postgres is reachable on the compose network only"


def test_stateful_and_long_running_services_have_healthchecks_and_restart_policies() -> None:
    for name, service in SERVICES.items():
        if name in ONE_SHOT:
            assert service["restart"] == "no"
            continue
        assert service.get("healthcheck", {}).get("test"), f"{name} has no healthcheck"
        assert service.get("restart") in {"always", "unless-stopped", "on-failure"}, f"{name}: no restart policy"
    assert STATEFUL <= SERVICES.keys()
    assert "pg_isready" in str(SERVICES["postgres"]["healthcheck"]["test"])


def test_code_servers_are_probed_without_loading_dagster() -> None:
    """The probe module (tests/orchestration_core/test_code_server_probe.py) on the port the server listens on: the
    `dagster api grpc-health-check` it replaces loads Dagster for every check."""
    for name in ("code-racing", "code-maintenance"):
        service = SERVICES[name]
        assert service["healthcheck"]["test"] == ["CMD", "python", "-m", "orchestration_core.code_server_probe", "4000"]
        command = service["command"]
        assert command[command.index("-p") + 1] == "4000", f"{name} listens elsewhere than its healthcheck asks"


def test_the_api_is_probed_on_its_own_port_within_the_check_timeout() -> None:
    """The probe module (tests/control_api/test_container_probe.py) asks the port the API listens on, and gives up
    (8 s) before Docker's timeout would cut it off without its output."""
    from control_api.container_probe import DEFAULT_URL, TIMEOUT_SECONDS

    service = SERVICES["api"]
    assert service["healthcheck"]["test"] == ["CMD", "python", "-m", "control_api.container_probe"]
    assert DEFAULT_URL == "http://127.0.0.1:8090/health" and service["command"][-2:] == ["--port", "8090"]
    assert TIMEOUT_SECONDS < float(service["healthcheck"]["timeout"].removesuffix("s")) == 10


def test_every_service_has_resource_limits() -> None:
    for name, service in SERVICES.items():
        limits = service.get("deploy", {}).get("resources", {}).get("limits", {})
        assert limits.get("memory") and limits.get("cpus"), f"{name} has no cpu/memory limits"


def test_dependencies_wait_for_health_or_completion() -> None:
    for name, service in SERVICES.items():
        for dependency, spec in (service.get("depends_on") or {}).items():
            condition = spec["condition"]
            if condition == "service_healthy":
                assert "healthcheck" in SERVICES[dependency], f"{name} waits on {dependency}, which has no healthcheck"
            else:
                assert condition == "service_completed_successfully" and dependency in ONE_SHOT, (name, dependency)
    for code_server in ("code-racing", "code-maintenance", "api"):
        assert SERVICES[code_server]["depends_on"]["migrate"]["condition"] == "service_completed_successfully"
    assert SERVICES["migrate"]["depends_on"]["postgres"]["condition"] == "service_healthy"
    migrate_command = " ".join(SERVICES["migrate"]["command"])
    for step in ("dagster instance migrate", "racing db upgrade", "maintenance db upgrade"):
        assert step in migrate_command


def test_dockerfiles_run_as_a_non_root_user() -> None:
    for dockerfile in DOCKERFILES:
        lines = dockerfile.read_text().splitlines()
        users = [line.split()[1] for line in lines if line.startswith("USER ")]
        assert users and users[-1] not in {"root", "0"}, f"{dockerfile.name} ends as root"


def test_dagster_image_has_no_user_code() -> None:
    text = (REPO_ROOT / "deploy" / "Dockerfile.dagster").read_text()
    for package in ("racing_orchestration", "maintenance_jobs", "pyproject.toml"):
        assert package not in text
    lock = (REPO_ROOT / "deploy" / "requirements-dagster.lock").read_text()
    assert "racing-orchestration" not in lock and "fastapi" not in lock


def test_code_servers_serve_the_workspace_locations_from_their_own_image() -> None:
    deploy_workspace = yaml.safe_load((REPO_ROOT / "deploy" / "workspace.yaml").read_text())["load_from"]
    local_workspace = yaml.safe_load((REPO_ROOT / "workspace.yaml").read_text())["load_from"]
    local_names = [entry["python_module"]["location_name"] for entry in local_workspace]
    servers = [entry["grpc_server"] for entry in deploy_workspace]
    assert [server["location_name"] for server in servers] == local_names
    for server in servers:
        service = SERVICES[server["host"]]
        command = service["command"]
        assert command[command.index("--location-name") + 1] == server["location_name"]
        assert command[command.index("-p") + 1] == str(server["port"])
        assert service["environment"]["DAGSTER_CURRENT_IMAGE"] == service["image"]


def test_the_racing_sensors_request_checkpoints_60_s_ahead_in_compose() -> None:
    # A run container starts ~10-20 s slower than a local run worker (README "Checkpoint timing"); `.env` may change it.
    margin = SERVICES["code-racing"]["environment"]["RACING_CHECKPOINT_LAUNCH_AHEAD_SECONDS"]
    assert interpolate(margin, {}) == "60"
    assert interpolate(margin, {"RACING_CHECKPOINT_LAUNCH_AHEAD_SECONDS": "90"}) == "90"


def test_run_launcher_network_and_env_passthrough_match_the_daemon() -> None:
    instance_config = yaml.safe_load((REPO_ROOT / "deploy" / "dagster.yaml").read_text())
    launcher = instance_config["run_launcher"]
    assert launcher["class"] == "DockerRunLauncher"
    assert launcher["config"]["network"] == COMPOSE["networks"]["runs"]["name"]
    assert launcher["config"]["container_kwargs"]["auto_remove"] is True
    daemon_environment = SERVICES["daemon"]["environment"]
    missing = [name for name in launcher["config"]["env_vars"] if "=" not in name and name not in daemon_environment]
    assert not missing, f"the daemon cannot pass these through to run containers: {missing}"
    # Each code location's runs need the settings its resources read.
    assert {"DAGSTER_POSTGRES_URL", "RACING_DATABASE_URL", "MAINTENANCE_DATABASE_URL", "GITEA_TOKEN"} <= set(
        launcher["config"]["env_vars"]
    )


def test_run_containers_mount_the_compose_volumes_by_their_fixed_names() -> None:
    """Compute logs, the backup folders and the export reach run containers only if the launcher's names match
    compose's."""
    instance_config = yaml.safe_load((REPO_ROOT / "deploy" / "dagster.yaml").read_text())
    mounts = dict(v.split(":", 1) for v in instance_config["run_launcher"]["config"]["container_kwargs"]["volumes"])
    fixed_names = {key: spec["name"] for key, spec in COMPOSE["volumes"].items() if spec and "name" in spec}
    assert set(mounts) == {fixed_names["compute-logs"], fixed_names["backup-sources"], fixed_names["backups"],
                           fixed_names["exports"]}
    # The export is written where RACING_EXPORT_DIR says, in the code server and every run container.
    export_dir = SERVICES["code-racing"]["environment"]["RACING_EXPORT_DIR"]
    assert mounts[fixed_names["exports"]] == export_dir
    assert f"exports:{export_dir}" in SERVICES["code-racing"]["volumes"]
    assert "RACING_EXPORT_DIR" in instance_config["run_launcher"]["config"]["env_vars"]
    compute_log_dir = instance_config["compute_logs"]["config"]["base_dir"]
    assert mounts[fixed_names["compute-logs"]] == compute_log_dir
    assert mounts[fixed_names["backup-sources"]] == "/data:ro"  # backups never write into what they read
    # The UI (webserver) reads what run containers write: the same volume at the same path.
    assert f"compute-logs:{compute_log_dir}" in SERVICES["webserver"]["volumes"]
    for dockerfile in ("Dockerfile.dagster", "Dockerfile.user_code"):  # owned by the images' user on first mount
        assert compute_log_dir in (REPO_ROOT / "deploy" / dockerfile).read_text()


def webserver_port() -> str:
    command = SERVICES["webserver"]["command"]
    return command[command.index("-p") + 1]


def test_manual_triggers_reach_the_webserver_by_its_service_name() -> None:
    """Inside the compose networks, not through the front: the control API's GraphQL launches need no login and
    send no Origin."""
    url = SERVICES["api"]["environment"]["DAGSTER_WEBSERVER_URL"]
    assert url == f"http://webserver:{webserver_port()}"
    assert "webserver" in network_peers(SERVICES, "api")


def test_the_api_pings_the_code_servers_of_the_workspace() -> None:
    """/health and /metrics ping each code server at CODE_SERVER_ADDRESSES: the same addresses the daemon loads."""
    from platform_monitoring.liveness import parse_code_servers

    servers = [entry["grpc_server"] for entry in
               yaml.safe_load((REPO_ROOT / "deploy" / "workspace.yaml").read_text())["load_from"]]
    pinged = parse_code_servers(SERVICES["api"]["environment"]["CODE_SERVER_ADDRESSES"])
    assert [(s.location, s.host, s.port) for s in pinged] == [
        (server["location_name"], server["host"], server["port"]) for server in servers]


def test_the_alert_path_starts_without_the_parts_it_watches() -> None:
    """Prometheus and Alertmanager wait for nothing they watch: a `service_healthy` on the control API kept Prometheus
    "created" whenever the API came up unhealthy (compose gives up on dependents), so the deployment that most needed
    a page had no Prometheus to send one. A scrape target that is not up yet is a failed scrape, which the rules
    allow for (ControlApiMetricsMissing after 5 minutes)."""
    assert set(SERVICES["prometheus"].get("depends_on") or {}) <= {"alertmanager"}
    assert not SERVICES["alertmanager"].get("depends_on")


def test_alertmanager_is_the_prometheus_alert_path_to_the_run_alerts_webhook() -> None:
    prometheus = yaml.safe_load((REPO_ROOT / "deploy" / "prometheus" / "prometheus.yml").read_text())
    [target] = prometheus["alerting"]["alertmanagers"][0]["static_configs"][0]["targets"]
    service = SERVICES["alertmanager"]
    assert target == "alertmanager:9093" and "9093" in service["ports"][0]
    assert SERVICES["prometheus"]["depends_on"]["alertmanager"]["condition"] == "service_healthy"
    # The same webhook as the run alerts, written by the entrypoint to the tmpfs the config's api_url_file reads.
    assert service["environment"]["ALERT_WEBHOOK_URL"] == "${ALERT_WEBHOOK_URL:-}"
    assert SERVICES["daemon"]["environment"]["ALERT_WEBHOOK_URL"] == "${ALERT_WEBHOOK_URL:-}"
    config = yaml.safe_load((REPO_ROOT / "deploy" / "alertmanager" / "alertmanager.yml").read_text())
    url_files = {slack["api_url_file"] for receiver in config["receivers"] for slack in receiver["slack_configs"]}
    assert url_files == {"/run/alertmanager/webhook_url"}
    assert service["tmpfs"] == ["/run/alertmanager"]
    entrypoint = (REPO_ROOT / "deploy" / "alertmanager" / "entrypoint.sh").read_text()
    assert 'url_file=/run/alertmanager/webhook_url' in entrypoint and "exec /bin/alertmanager" in entrypoint
    assert "alertmanager-data:/alertmanager" in service["volumes"]


def test_postgres_is_healthy_only_when_it_listens_on_the_network() -> None:
    """The entrypoint's temporary server for the init scripts listens on the Unix socket only: a check over TCP
    cannot pass before the server migrate will use is up."""
    command = SERVICES["postgres"]["healthcheck"]["test"]
    assert command[0] == "CMD-SHELL" and "pg_isready -h 127.0.0.1 " in command[1], command


def test_postgres_runs_under_an_init_that_reaps_orphans() -> None:
    """A healthcheck that times out on a loaded host is killed by Docker; its orphaned `pg_isready` (or a `docker exec
    psql`) is then re-parented to PID 1. When PID 1 is the postmaster and that orphan dies of SIGPIPE, Postgres takes
    it for a crashed backend and resets every connection ("server process ... was terminated by signal 13": 10 times
    in an hour of soak under load, failing the runs in flight). Docker's init as PID 1 reaps them instead."""
    assert SERVICES["postgres"].get("init") is True


def test_no_healthcheck_uses_start_interval() -> None:
    """Compose refuses `start_interval` below Docker Engine 25 ("can't set healthcheck.start_interval as feature
    require Docker Engine v25 or later"), and the reference engine is Debian 12's docker.io 20.10: every `up` would
    fail. Tried for a faster `up` and withdrawn before it landed."""
    assert not [name for name, service in SERVICES.items() if "start_interval" in service.get("healthcheck", {})]


@pytest.mark.parametrize(
    ("services", "name", "peers"),
    [
        ({"a": {"networks": ["x"]}, "b": {"networks": ["x", "y"]}, "c": {"networks": ["y"]}}, "a", {"b"}),
        ({"a": {"networks": ["x"]}, "b": {"networks": ["x", "y"]}, "c": {"networks": ["y"]}}, "b", {"a", "c"}),
        ({"a": {"networks": {"x": {"aliases": ["z"]}}}, "b": {"networks": ["x"]}}, "a", {"b"}),
        ({"a": {}, "b": {}, "c": {"networks": ["x"]}}, "a", {"b"}),  # no networks: compose's `default`
        ({"a": {"networks": []}, "b": {}}, "a", set()),  # an empty list joins nothing
    ],
)
def test_network_peers(services: dict, name: str, peers: set[str]) -> None:
    assert network_peers(services, name) == peers


def test_every_service_names_its_networks() -> None:
    """No service lands on compose's `default` network, which would join it to every other such service."""
    assert [name for name, service in SERVICES.items() if "networks" not in service] == []
    assert "default" not in network_members(SERVICES)


def test_the_webserver_is_reached_only_through_the_front() -> None:
    """The stock webserver has no login and runs a GET mutation from any page (deploy/front/nginx.conf.template):
    it publishes no port, and the front, which publishes the UI's address on loopback, is its only peer on the
    `ui` network. The front passes requests to the webserver's port."""
    assert not SERVICES["webserver"].get("ports"), "the webserver publishes a port: the UI bypasses the front"
    front = SERVICES["front"]
    assert front["ports"] == ["127.0.0.1:3000:3000"]
    assert front["build"] == {"context": "deploy/front", "dockerfile": "../Dockerfile.front"}
    assert network_peers(SERVICES, "front") == {"webserver"}
    assert network_members(SERVICES)["ui"] == {"front", "webserver"}
    assert front["environment"]["FRONT_UPSTREAM"] == f"webserver:{webserver_port()}"
    # The login comes from .env and is required; the address the front accepts is the one the API's run links use.
    assert front["environment"]["FRONT_USER"] == "${FRONT_USER:?set FRONT_USER in .env}"
    assert front["environment"]["FRONT_PASSWORD"] == "${FRONT_PASSWORD:?set FRONT_PASSWORD in .env}"
    assert interpolate(front["environment"]["FRONT_PUBLIC_ORIGIN"], {}) == "http://127.0.0.1:3000"
    assert interpolate(SERVICES["daemon"]["environment"]["DAGSTER_UI_URL"], {}) == "http://127.0.0.1:3000"
    assert env_example()["FRONT_PUBLIC_ORIGIN"] == env_example()["DAGSTER_UI_URL"]


def test_alertmanager_shares_a_network_with_prometheus_only() -> None:
    """Its API (no login) takes alerts and silences: only Prometheus posts to it (deploy/prometheus/prometheus.yml);
    people use the loopback port."""
    assert network_peers(SERVICES, "alertmanager") == {"prometheus"}


def test_code_servers_share_networks_only_with_their_clients() -> None:
    """The gRPC port runs whatever a caller asks of the code location. Callers: the webserver and the daemon, and
    the control API's liveness ping (/health, /metrics: CODE_SERVER_ADDRESSES). Postgres is on their network for the
    code servers' own storage use. Run containers load code from their image and never call a code server."""
    for name in ("code-racing", "code-maintenance"):
        peers = network_peers(SERVICES, name)
        assert peers - {"code-racing", "code-maintenance"} == {"webserver", "daemon", "api", "postgres"}, (name, peers)


def test_run_containers_join_a_network_holding_postgres_only() -> None:
    """Run containers join the network deploy/dagster.yaml names; they need Postgres (and the internet), and reach no
    code server, webserver or API from it."""
    members = network_members(SERVICES)
    assert members["runs"] == {"postgres"}
    assert not COMPOSE["networks"]["runs"].get("internal"), "runs call the TAB API and the alert webhook"


def test_each_service_reaches_what_it_calls() -> None:
    """Who calls whom over the networks: the split keeps every call of the single network it replaced."""
    calls = {
        "migrate": {"postgres"}, "code-racing": {"postgres"}, "code-maintenance": {"postgres"},
        "webserver": {"postgres", "code-racing", "code-maintenance"},
        "daemon": {"postgres", "code-racing", "code-maintenance"},
        "api": {"postgres", "webserver", "code-racing", "code-maintenance"},
        "prometheus": {"api", "alertmanager"}, "grafana": {"prometheus"}, "front": {"webserver"},
    }
    for caller, callees in calls.items():
        assert callees <= network_peers(SERVICES, caller), (caller, callees - network_peers(SERVICES, caller))


def test_service_networks_reads_both_syntaxes() -> None:
    assert service_networks({"networks": ["a", "b"]}) == {"a", "b"}
    assert service_networks({"networks": {"a": None}}) == {"a"}
    assert service_networks({}) == {"default"}
