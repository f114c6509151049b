"""README "Kubernetes" creates every Secret the manifests and the launcher name, with the keys the run pods read."""

from __future__ import annotations

import pytest

from tests.deploy.compose_model import REPO_ROOT
from tests.deploy.kubernetes.manifests import KUBERNETES_DIR, NAMESPACE, render
from tests.deploy.kubernetes.test_parity import RUNTIME_SECRET_KEYS

pytestmark = pytest.mark.unit

OBJECTS = render(KUBERNETES_DIR)


def test_readme_creates_every_secret_the_manifests_name() -> None:
    readme = (REPO_ROOT / "README.md").read_text()
    section = readme[readme.index("## Kubernetes"):]
    named = {ref["name"] for obj in OBJECTS for ref in _secret_refs(obj)}
    named.add("racing-orchestration-runtime")  # the launcher's env_secrets
    for name in sorted(named):
        assert f"kubectl -n {NAMESPACE} create secret generic {name}" in section, name
    for key in RUNTIME_SECRET_KEYS:
        assert f"--from-literal={key}=" in section, key


def _secret_refs(node: object):
    if isinstance(node, dict):
        for key, value in node.items():
            if key in ("secretRef", "secretKeyRef") and isinstance(value, dict):
                yield value
            else:
                yield from _secret_refs(value)
    elif isinstance(node, list):
        for item in node:
            yield from _secret_refs(item)
