"""The house's rooms: arrows point down only. Read from every module's imports (top-level and inside functions).

orchestration_core <- racing_orchestration, maintenance_jobs <- control_api; local_stack (dev and tests) on top of
everything, imported by no production module, so the production image can leave it out.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from tests.conftest import REPO_ROOT

pytestmark = pytest.mark.unit

PRODUCTION = ("orchestration_core", "racing_orchestration", "maintenance_jobs", "control_api")
# package -> project packages it must never import
FORBIDDEN = {
    "orchestration_core": {"racing_orchestration", "maintenance_jobs", "control_api", "local_stack"},
    "racing_orchestration": {"maintenance_jobs", "control_api", "local_stack"},
    "maintenance_jobs": {"racing_orchestration", "control_api", "local_stack"},
    "control_api": {"racing_orchestration", "local_stack"},
}


def imported_packages(path: Path) -> set[str]:
    tree = ast.parse(path.read_text(), filename=str(path))
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found |= {alias.name.split(".")[0] for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found.add(node.module.split(".")[0])
    return found


def violations(package: str) -> list[str]:
    found = []
    for path in sorted((REPO_ROOT / package).rglob("*.py")):
        bad = imported_packages(path) & FORBIDDEN[package]
        if bad:
            found.append(f"{path.relative_to(REPO_ROOT)} imports {sorted(bad)}")
    return found


@pytest.mark.parametrize("package", PRODUCTION)
def test_package_imports_only_what_lies_below_it(package: str) -> None:
    assert violations(package) == []


def test_the_scan_sees_imports_inside_functions(tmp_path: Path) -> None:
    module = tmp_path / "m.py"
    module.write_text("def f():\n    from local_stack.stack import LocalStack\n    import racing_orchestration.tab\n")
    assert imported_packages(module) == {"local_stack", "racing_orchestration"}


def test_the_production_image_copies_no_dev_stack() -> None:
    dockerfile = (REPO_ROOT / "deploy" / "Dockerfile.user_code").read_text()
    copied = {line.split()[1] for line in dockerfile.splitlines() if line.startswith("COPY ") and "--from" not in line}
    assert {f"{p}" for p in PRODUCTION} <= copied and "local_stack" not in copied
