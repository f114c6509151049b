"""The Kubernetes form differs from compose only where the platform does. The alert path and workspace are generated
from the compose files (base/generated/ holds exact copies), and the instance equals deploy/dagster.yaml in every
block but the run launcher, whose Kubernetes settings map compose's one by one."""

from __future__ import annotations

import importlib.util
import re
from pathlib import Path

import pytest
import yaml

from tests.deploy.compose_model import REPO_ROOT, env_example, interpolate, load_compose
from tests.deploy.kubernetes.manifests import (
    BASE_DIR,
    KUBERNETES_DIR,
    NAMESPACE,
    compose_instance,
    find,
    instance_config,
    pod_specs,
    render,
)

pytestmark = pytest.mark.unit

_spec = importlib.util.spec_from_file_location("sync_from_compose", BASE_DIR / "scripts" / "sync_from_compose.py")
sync_from_compose = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(sync_from_compose)

OBJECTS = render(KUBERNETES_DIR)


@pytest.mark.parametrize("name", sorted(sync_from_compose.SOURCES))
def test_generated_copy_equals_its_compose_source(name: str) -> None:
    source = sync_from_compose.SOURCES[name]
    assert name not in sync_from_compose.stale_copies(), (
        f"deploy/kubernetes/base/generated/{name} differs from {source}: run "
        ".venv/bin/python deploy/kubernetes/base/scripts/sync_from_compose.py")


def test_a_changed_source_is_reported_and_resynced(tmp_path: Path) -> None:
    """The check above fails on a real difference, and the script repairs it (on a copy of the tree)."""
    for name, source in sync_from_compose.SOURCES.items():
        (tmp_path / source).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / source).write_bytes((REPO_ROOT / source).read_bytes())
    generated = tmp_path / "generated"
    assert sync_from_compose.stale_copies(generated, tmp_path) == sorted(sync_from_compose.SOURCES, key=list(
        sync_from_compose.SOURCES).index)
    sync_from_compose.sync(generated, tmp_path)
    assert sync_from_compose.stale_copies(generated, tmp_path) == []
    rules = tmp_path / "deploy/prometheus/alerts.yml"
    rules.write_text(rules.read_text().replace("for: 1m", "for: 2m", 1))
    assert sync_from_compose.stale_copies(generated, tmp_path) == ["alerts.yml"]


@pytest.mark.parametrize(("config_map", "files"), [
    ("prometheus-config", {"prometheus.yml": "deploy/prometheus/prometheus.yml",
                           "alerts.yml": "deploy/prometheus/alerts.yml"}),
    ("alertmanager-config", {"alertmanager.yml": "deploy/alertmanager/alertmanager.yml",
                             "slack.tmpl": "deploy/alertmanager/slack.tmpl",
                             "entrypoint.sh": "deploy/alertmanager/entrypoint.sh"}),
    ("dagster-workspace", {"workspace.yaml": "deploy/workspace.yaml"}),
    ("postgres-init", {"10-init-databases.sh": "deploy/postgres/init-databases.sh"}),
])
def test_rendered_config_maps_carry_the_compose_files(config_map: str, files: dict[str, str]) -> None:
    matches = [o for o in OBJECTS if o["kind"] == "ConfigMap" and o["metadata"]["name"].startswith(config_map + "-")]
    assert len(matches) == 1
    assert matches[0]["data"] == {key: (REPO_ROOT / path).read_text() for key, path in files.items()}


def instance_differences(kubernetes: dict, compose: dict) -> list[str]:
    """Top-level instance blocks that differ, the run launcher aside (the platform's one difference)."""
    keys = (set(kubernetes) | set(compose)) - {"run_launcher"}
    return sorted(key for key in keys if kubernetes.get(key) != compose.get(key))


def test_instance_equals_compose_but_for_the_launcher() -> None:
    assert instance_differences(instance_config(OBJECTS), compose_instance()) == []


@pytest.mark.parametrize(("block", "path", "value"), [
    ("concurrency", ("runs", "max_concurrent_runs"), 26),
    ("run_monitoring", ("max_runtime_seconds",), 7200),
    ("run_retries", ("max_retries",), 2),
    ("retention", ("schedule", "purge_after_days"), 30),
    ("run_coordinator", ("config", "dequeue_interval_seconds"), 5),
])
def test_a_compose_setting_not_reflected_fails(block: str, path: tuple[str, ...], value: object) -> None:
    compose = compose_instance()
    node = compose[block]
    for key in path[:-1]:
        node = node[key]
    node[path[-1]] = value
    assert instance_differences(instance_config(OBJECTS), compose) == [block]


def test_the_launcher_maps_compose_launcher_setting_by_setting() -> None:
    compose = compose_instance()["run_launcher"]["config"]
    k8s = instance_config(OBJECTS)["run_launcher"]
    assert (k8s["module"], k8s["class"]) == ("dagster_k8s", "K8sRunLauncher")
    config = k8s["config"]
    assert config["job_namespace"] == NAMESPACE
    # env passthrough -> ConfigMap and Secret by name: every variable compose passes reaches run pods.
    settings = find(OBJECTS, "ConfigMap", config["env_config_maps"][0])["data"]
    secret_keys = set(RUNTIME_SECRET_KEYS)
    assert config["env_secrets"] == ["racing-orchestration-runtime"]
    assert set(compose["env_vars"]) <= set(settings) | secret_keys
    # ...and nothing compose does not give its services (x-runtime-env).
    runtime_env = yaml.safe_load((REPO_ROOT / "docker-compose.yml").read_text())["x-runtime-env"]
    assert set(settings) | secret_keys <= set(runtime_env)
    assert not set(settings) & secret_keys
    # mem_limit -> resources; auto_remove -> a TTL of at most a day; Dagster retries, not the Job controller.
    assert config["resources"]["limits"]["memory"] == "1Gi" and compose["container_kwargs"]["mem_limit"] == "1g"
    job_spec = config["run_k8s_config"]["job_spec_config"]
    assert 0 < job_spec["ttl_seconds_after_finished"] <= 86400
    assert job_spec["backoff_limit"] == 0
    # The same folders at the same paths: compose's named volumes -> PVCs.
    mounts = {m["mountPath"] + (":ro" if m.get("readOnly") else "") for m in config["volume_mounts"]}
    assert mounts == {v.split(":", 1)[1] for v in compose["container_kwargs"]["volumes"]}
    claims = {v["persistentVolumeClaim"]["claimName"] for v in config["volumes"]}
    assert claims <= {o["metadata"]["name"] for o in OBJECTS if o["kind"] == "PersistentVolumeClaim"}
    assert instance_config(OBJECTS)["compute_logs"]["config"]["base_dir"] == "/opt/dagster/compute_logs"


# The keys of the Secret `racing-orchestration-runtime` (README "Kubernetes" creates it): the secret part of
# compose's x-runtime-env.
RUNTIME_SECRET_KEYS = ("DAGSTER_POSTGRES_URL", "RACING_DATABASE_URL", "MAINTENANCE_DATABASE_URL", "ALERT_WEBHOOK_URL",
                       "GITEA_TOKEN")


# Compose service -> (workload, container) of the same image and process. Both forms run them on a read-only root
# filesystem; the compose deployment's tests (tests/production) run them so, which proves the Kubernetes claim for
# our images as far as the writable paths go.
READ_ONLY_WORKLOADS = {
    "migrate": ("Job/migrate", "migrate"),
    "code-racing": ("Deployment/code-racing", "code-server"),
    "code-maintenance": ("Deployment/code-maintenance", "code-server"),
    "webserver": ("Deployment/webserver", "webserver"),
    "daemon": ("Deployment/daemon", "daemon"),
    "api": ("Deployment/api", "api"),
    "front": ("Deployment/front", "front"),
}


def writable_paths(pod_spec: dict, container_name: str) -> set[str]:
    """The mount paths of `container_name` that it may write: emptyDirs and PVCs not mounted read-only."""
    writable_volumes = {v["name"] for v in pod_spec.get("volumes", [])
                        if "emptyDir" in v or "persistentVolumeClaim" in v}
    [container] = [c for c in pod_spec["containers"] if c["name"] == container_name]
    return {m["mountPath"] for m in container.get("volumeMounts", [])
            if m["name"] in writable_volumes and not m.get("readOnly", False)}


def covered(path: str, writable: set[str]) -> bool:
    return any(path == w or path.startswith(w.rstrip("/") + "/") for w in writable)


@pytest.mark.parametrize(("path", "writable", "expected"), [
    ("/tmp", {"/tmp"}, True),
    ("/opt/dagster/dagster_home/.nux", {"/opt/dagster/dagster_home"}, True),
    ("/opt/dagster/dagster_home_other", {"/opt/dagster/dagster_home"}, False),
    ("/run/front", {"/tmp"}, False),
])
def test_covered(path: str, writable: set[str], expected: bool) -> None:
    assert covered(path, writable) is expected


@pytest.mark.parametrize("service", sorted(READ_ONLY_WORKLOADS))
def test_our_processes_run_read_only_in_both_forms_with_kubernetes_writing_where_compose_does(service: str) -> None:
    compose = load_compose()["services"][service]
    workload, container_name = READ_ONLY_WORKLOADS[service]
    pod_spec = pod_specs(OBJECTS)[workload]
    [container] = [c for c in pod_spec["containers"] if c["name"] == container_name]
    assert compose.get("read_only") is True
    assert container["securityContext"]["readOnlyRootFilesystem"] is True
    tmpfs = [entry.split(":")[0] for entry in compose.get("tmpfs", [])]
    assert tmpfs, f"{service}: a read-only service with no tmpfs writes nowhere but its volumes"
    writable = writable_paths(pod_spec, container_name)
    assert [path for path in tmpfs if not covered(path, writable)] == []


def test_the_postgres_backup_runs_with_the_three_urls_and_writes_to_the_backups_volume_in_both_forms() -> None:
    """The seeded backup's backup_dir lies under the writable backups volume of run containers (compose's named volume,
    Kubernetes' `backups` PVC), and its runs receive the three database URLs (compose's env_vars, the runtime Secret)
    and nothing about them from the task."""
    from pathlib import PurePosixPath

    from maintenance_jobs.seed import load_seed_tasks

    (seed,) = [s for s in load_seed_tasks() if s.executor == "postgres_backup_executor"]
    assert PurePosixPath("/backups") in PurePosixPath(seed.config["backup_dir"]).parents
    compose = compose_instance()["run_launcher"]["config"]
    assert "racing-orchestration-backups:/backups" in compose["container_kwargs"]["volumes"]
    urls = {"DAGSTER_POSTGRES_URL", "RACING_DATABASE_URL", "MAINTENANCE_DATABASE_URL"}
    assert urls <= set(compose["env_vars"]) and urls <= set(RUNTIME_SECRET_KEYS)
    config = instance_config(OBJECTS)["run_launcher"]["config"]
    (mount,) = [m for m in config["volume_mounts"] if m["mountPath"] == "/backups"]
    assert not mount.get("readOnly")
    (volume,) = [v for v in config["volumes"] if v["name"] == mount["name"]]
    claim = find(OBJECTS, "PersistentVolumeClaim", volume["persistentVolumeClaim"]["claimName"])
    assert "ReadWriteMany" in claim["spec"]["accessModes"]


def test_the_user_code_images_pg_dump_is_the_servers_major_in_both_forms() -> None:
    """pg_dump refuses a server newer than itself: the image's client is the server's major, checked at build."""
    dockerfile = (REPO_ROOT / "deploy" / "Dockerfile.user_code").read_text()
    [client_major] = re.findall(r'pg_dump --version \| grep -q "\(PostgreSQL\) (\d+)\\\."', dockerfile)
    compose_server = load_compose()["services"]["postgres"]["image"]
    (k8s_server,) = {c["image"] for spec in pod_specs(OBJECTS).values() for c in spec["containers"]
                     if c["image"].startswith("postgres:")}
    assert compose_server.split(":")[1].split(".")[0] == client_major == k8s_server.split(":")[1].split(".")[0]


# --- the daemon under the memory guard (orchestration_core/memory_guard.py) -----------------------------------------

GUARD_PREFIX = ["python", "/opt/dagster/memory_guard.py", "--name", "dagster-daemon", "--"]
GUARD_BOUND = "MEMORY_GUARD_RESTART_ABOVE_MIB"
_QUANTITY = re.compile(r"(\d+(?:\.\d+)?)([a-zA-Z]*)")
# Compose's byte units are binary whatever their case; Kubernetes' are binary with an i, decimal without.
_UNIT_MIB = {"": 1 / 2**20, "b": 1 / 2**20, "k": 1 / 1024, "kb": 1 / 1024, "m": 1, "mb": 1, "g": 1024, "gb": 1024,
             "Ki": 1 / 1024, "Mi": 1, "Gi": 1024, "K": 1000 / 2**20, "M": 10**6 / 2**20, "G": 10**9 / 2**20}


def memory_mib(quantity: str, form: str) -> float:
    """A memory limit in MiB: compose's `1g`, `512m` or Kubernetes' `1Gi`, `512Mi`, `1G`."""
    number, unit = _QUANTITY.fullmatch(quantity).groups()
    return float(number) * _UNIT_MIB[unit.lower() if form == "compose" else unit]


@pytest.mark.parametrize(("quantity", "form", "mib"), [
    ("1g", "compose", 1024), ("1G", "compose", 1024), ("512m", "compose", 512), ("768mb", "compose", 768),
    ("1Gi", "kubernetes", 1024), ("512Mi", "kubernetes", 512), ("1G", "kubernetes", 10**9 / 2**20),
])
def test_memory_mib(quantity: str, form: str, mib: float) -> None:
    assert memory_mib(quantity, form) == pytest.approx(mib)


def guard_problems(command: list[str], bound: str | None, limit_mib: float) -> list[str]:
    """What keeps a daemon's container from restarting the daemon in place, in good time, before its hard limit
    (where the kernel kills it in the middle of whatever it was doing)."""
    problems = []
    if command[:len(GUARD_PREFIX)] != GUARD_PREFIX or command[len(GUARD_PREFIX):len(GUARD_PREFIX) + 2] != [
            "dagster-daemon", "run"]:
        problems.append(f"not `dagster-daemon run` under the memory guard: {command}")
    if bound is None or not bound.isdigit() or int(bound) == 0:
        problems.append(f"no restart bound: {GUARD_BOUND}={bound!r}")
    elif int(bound) > limit_mib / 2:
        problems.append(f"bound {bound} MiB above half the {limit_mib:g} MiB memory limit")
    return problems


def compose_daemon(env: dict[str, str]) -> tuple[list[str], str | None, float]:
    daemon = load_compose()["services"]["daemon"]
    bound = daemon["environment"].get(GUARD_BOUND)
    return (daemon["command"], None if bound is None else interpolate(bound, env),
            memory_mib(daemon["deploy"]["resources"]["limits"]["memory"], "compose"))


def kubernetes_daemon() -> tuple[list[str], str | None, float]:
    [container] = [c for c in pod_specs(OBJECTS)["Deployment/daemon"]["containers"] if c["name"] == "daemon"]
    bound = next((e.get("value") for e in container.get("env", []) if e["name"] == GUARD_BOUND), None)
    return (container["command"], bound, memory_mib(container["resources"]["limits"]["memory"], "kubernetes"))


@pytest.mark.parametrize("form", ["compose default", "compose .env.example", "kubernetes"])
def test_the_daemon_runs_under_the_memory_guard_bounded_at_most_half_its_limit(form: str) -> None:
    if form == "kubernetes":
        command, bound, limit = kubernetes_daemon()
    else:
        command, bound, limit = compose_daemon({} if form == "compose default" else env_example())
    assert guard_problems(command, bound, limit) == []


def test_both_forms_run_the_same_daemon_command_on_their_own_workspace_path() -> None:
    compose_command, compose_bound, _ = compose_daemon({})
    kubernetes_command, kubernetes_bound, _ = kubernetes_daemon()
    assert compose_command == [*GUARD_PREFIX, "dagster-daemon", "run", "-w", "/opt/dagster/dagster_home/workspace.yaml"]
    assert kubernetes_command == [*GUARD_PREFIX, "dagster-daemon", "run", "-w", "/opt/dagster/workspace/workspace.yaml"]
    assert compose_bound == kubernetes_bound == env_example()["DAEMON_RESTART_ABOVE_MIB"]


@pytest.mark.parametrize(("command", "bound", "limit", "problem"), [
    ([*GUARD_PREFIX, "dagster-daemon", "run"], "512", 1024, None),  # exactly half: allowed
    ([*GUARD_PREFIX, "dagster-daemon", "run"], "513", 1024, "bound 513 MiB above half the 1024 MiB memory limit"),
    ([*GUARD_PREFIX, "dagster-daemon", "run"], "0", 1024, "no restart bound"),
    ([*GUARD_PREFIX, "dagster-daemon", "run"], None, 1024, "no restart bound"),
    (["dagster-daemon", "run"], "384", 1024, "not `dagster-daemon run` under the memory guard"),
    ([*GUARD_PREFIX, "sleep", "1"], "384", 1024, "not `dagster-daemon run` under the memory guard"),
])
def test_guard_problems_name_a_missing_guard_or_bound(command, bound, limit, problem) -> None:
    problems = guard_problems(command, bound, limit)
    if problem is None:
        assert problems == []
    else:
        assert len(problems) == 1 and problems[0].startswith(problem), problems


# --- the code servers under the memory guard, as the daemon -------------------------------------------------------

CODE_SERVERS = {"code-racing": "racing_orchestration", "code-maintenance": "maintenance_jobs"}


def code_server_guard_problems(command: list[str], name: str, bound: str | None, limit_mib: float) -> list[str]:
    """What keeps a code server's container from restarting it in place before its hard limit."""
    prefix = ["python", "-m", "orchestration_core.memory_guard", "--name", name, "--", "dagster", "api", "grpc"]
    problems = [] if command[:len(prefix)] == prefix else [f"not `dagster api grpc` under the guard: {command}"]
    if bound is None or not bound.isdigit() or int(bound) == 0:
        problems.append(f"no restart bound: {GUARD_BOUND}={bound!r}")
    elif int(bound) > limit_mib / 2:
        problems.append(f"bound {bound} MiB above half the {limit_mib:g} MiB memory limit")
    return problems


def kubernetes_code_server(name: str) -> tuple[list[str], str | None, float]:
    location = CODE_SERVERS[name]
    [container] = [c for spec in pod_specs(OBJECTS).values() for c in spec["containers"]
                   if c["name"] == "code-server" and location in " ".join(c["command"])]
    bound = next((e.get("value") for e in container.get("env", []) if e["name"] == GUARD_BOUND), None)
    return container["command"], bound, memory_mib(container["resources"]["limits"]["memory"], "kubernetes")


@pytest.mark.parametrize("name", sorted(CODE_SERVERS))
def test_each_code_server_runs_under_the_memory_guard_bounded_at_most_half_its_limit_in_both_forms(name) -> None:
    service = load_compose()["services"][name]
    compose_bound = interpolate(service["environment"][GUARD_BOUND], {})
    compose_limit = memory_mib(service["deploy"]["resources"]["limits"]["memory"], "compose")
    assert code_server_guard_problems(service["command"], name, compose_bound, compose_limit) == []
    command, bound, limit = kubernetes_code_server(name)
    assert code_server_guard_problems(command, name, bound, limit) == []
    assert compose_bound == bound == env_example()["CODE_SERVER_RESTART_ABOVE_MIB"]
    # The same served command in both forms, after the guard's `--`.
    assert service["command"][service["command"].index("--"):] == command[command.index("--"):]


@pytest.mark.parametrize(("command", "bound", "problem"), [
    (["python", "-m", "orchestration_core.memory_guard", "--name", "code-racing", "--", "dagster", "api", "grpc"],
     "512", None),
    (["dagster", "api", "grpc"], "512", "not `dagster api grpc` under the guard"),
    # The proxy is a second process with Dagster loaded, for nothing an image needs (docker-compose.yml).
    (["python", "-m", "orchestration_core.memory_guard", "--name", "code-racing", "--", "dagster", "code-server",
      "start"], "512", "not `dagster api grpc` under the guard"),
    (["python", "-m", "orchestration_core.memory_guard", "--name", "code-racing", "--", "dagster", "api", "grpc"],
     "600", "bound 600 MiB above half"),
])
def test_code_server_guard_problems_name_a_missing_guard_or_bound(command, bound, problem) -> None:
    problems = code_server_guard_problems(command, "code-racing", bound, 1024)
    assert problems == [] if problem is None else (len(problems) == 1 and problems[0].startswith(problem))
