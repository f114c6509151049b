"""The Kubernetes form as the tests see it: deploy/kubernetes rendered by the real `kubectl kustomize`."""

from __future__ import annotations

import shutil
import subprocess
from functools import cache
from pathlib import Path

import pytest
import yaml

from tests.deploy.compose_model import REPO_ROOT

KUBERNETES_DIR = REPO_ROOT / "deploy" / "kubernetes"
BASE_DIR = KUBERNETES_DIR / "base"
EXTERNAL_POSTGRES_DIR = KUBERNETES_DIR / "overlays" / "external-postgres"
NAMESPACE = "racing-orchestration"


def kubectl_binary() -> str:
    """kubectl (kustomize is built in); without it the tests fail, never skip, and say how to install it."""
    found = shutil.which("kubectl")
    if found is None:
        pytest.fail("kubectl not found: install Debian's kubernetes-client package (apt-get install "
                    "--no-install-recommends kubernetes-client; tools/system_packages.sh does it) or any kubectl >= 1.27")
    return found


@cache
def _render(directory: str) -> str:
    completed = subprocess.run([kubectl_binary(), "kustomize", directory], capture_output=True, text=True,
                               timeout=120)
    if completed.returncode != 0:
        raise AssertionError(f"kubectl kustomize {directory} failed:\n{completed.stderr}")
    return completed.stdout


def render(directory: Path = KUBERNETES_DIR) -> list[dict]:
    """Every object `kubectl apply -k directory` would apply."""
    return [doc for doc in yaml.safe_load_all(_render(str(directory))) if doc]


def find(objects: list[dict], kind: str, name: str) -> dict:
    matches = [o for o in objects if o["kind"] == kind and o["metadata"]["name"] == name]
    assert len(matches) == 1, f"{kind}/{name}: {len(matches)} objects"
    return matches[0]


def pod_specs(objects: list[dict]) -> dict[str, dict]:
    """kind/name -> pod spec of every workload."""
    specs = {}
    for obj in objects:
        if obj["kind"] in ("Deployment", "StatefulSet", "Job"):
            specs[f"{obj['kind']}/{obj['metadata']['name']}"] = obj["spec"]["template"]["spec"]
    return specs


def instance_config(objects: list[dict]) -> dict:
    """The instance (dagster.yaml) of the rendered `dagster-instance` ConfigMap."""
    return yaml.safe_load(find(objects, "ConfigMap", "dagster-instance")["data"]["dagster.yaml"])


def compose_instance() -> dict:
    return yaml.safe_load((REPO_ROOT / "deploy" / "dagster.yaml").read_text())


def api_code_servers(objects: list[dict]):
    """The code servers the control API's Deployment pings (CODE_SERVER_ADDRESSES), parsed as the API parses them."""
    from platform_monitoring.liveness import parse_code_servers

    [container] = [c for c in find(objects, "Deployment", "api")["spec"]["template"]["spec"]["containers"]
                   if c["name"] == "api"]
    [value] = [e["value"] for e in container["env"] if e["name"] == "CODE_SERVER_ADDRESSES"]
    return parse_code_servers(value)
