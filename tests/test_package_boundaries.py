"""The house's rooms: arrows point down only. Read from every module's imports (top-level and inside functions).

orchestration_core <- racing_orchestration, maintenance_jobs <- control_api; local_stack (dev and tests) on top of
everything, imported by no production module, so the production image can leave it out.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from tests.conftest import REPO_ROOT
from tests.package_scan import PRODUCTION_PACKAGES, parse, production_modules

pytestmark = pytest.mark.unit

PRODUCTION = PRODUCTION_PACKAGES
# package -> project packages it must never import
FORBIDDEN = {
    "orchestration_core": {"racing_orchestration", "maintenance_jobs", "control_api", "local_stack"},
    "racing_orchestration": {"maintenance_jobs", "control_api", "local_stack"},
    "maintenance_jobs": {"racing_orchestration", "control_api", "local_stack"},
    "control_api": {"racing_orchestration", "local_stack"},
}


def imported_packages(tree: ast.Module) -> set[str]:
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found |= {alias.name.split(".")[0] for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found.add(node.module.split(".")[0])
    return found


def violations(package: str, root: Path = REPO_ROOT) -> list[str]:
    return [f"{relative} imports {sorted(imported_packages(tree) & FORBIDDEN[package])}"
            for relative, tree in production_modules((package,), root) if imported_packages(tree) & FORBIDDEN[package]]


@pytest.mark.parametrize("package", PRODUCTION)
def test_package_imports_only_what_lies_below_it(package: str) -> None:
    assert violations(package) == []


def test_the_scan_sees_imports_inside_functions(tmp_path: Path) -> None:
    module = tmp_path / "m.py"
    module.write_text("def f():\n    from local_stack.stack import LocalStack\n    import racing_orchestration.tab\n")
    assert imported_packages(parse(module)) == {"local_stack", "racing_orchestration"}


def test_the_scan_finds_an_upward_import_planted_in_a_package(tmp_path: Path) -> None:
    (tmp_path / "orchestration_core" / "audit").mkdir(parents=True)
    (tmp_path / "orchestration_core" / "audit" / "planted.py").write_text(
        "from maintenance_jobs.registry import TaskRegistry\n")
    (tmp_path / "orchestration_core" / "clean.py").write_text("from orchestration_core.postgres import create_engine\n")
    assert violations("orchestration_core", tmp_path) == ["orchestration_core/audit/planted.py imports ['maintenance_jobs']"]


def test_the_production_image_copies_no_dev_stack() -> None:
    dockerfile = (REPO_ROOT / "deploy" / "Dockerfile.user_code").read_text()
    copied = {line.split()[1] for line in dockerfile.splitlines() if line.startswith("COPY ") and "--from" not in line}
    assert {f"{p}" for p in PRODUCTION} <= copied and "local_stack" not in copied
