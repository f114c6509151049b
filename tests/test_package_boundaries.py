"""The house's rooms: arrows point down only. Read from every module's imports (top-level and inside functions).

orchestration_core <- racing_orchestration, maintenance_jobs <- platform_monitoring <- control_api; local_stack (dev
and tests) on top of everything, imported by no production module, so the production image can leave it out.

platform_monitoring and control_api never load a code location (racing_orchestration; maintenance_jobs' definitions and
the modules that build its jobs, sensors and resources): not by an import statement, not by a string
(`importlib.import_module`, `__import__`, `importlib.util.find_spec`), and for platform_monitoring not through any
chain of project modules either. What they know of schedules, sensors and jobs they ask the webserver.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from tests.conftest import REPO_ROOT
from tests.package_scan import PRODUCTION_PACKAGES, dynamic_imports, parse, production_modules

pytestmark = pytest.mark.unit

PRODUCTION = PRODUCTION_PACKAGES
# package -> project packages it must never import
FORBIDDEN = {
    "orchestration_core": {"racing_orchestration", "maintenance_jobs", "platform_monitoring", "control_api",
                           "local_stack"},
    "racing_orchestration": {"maintenance_jobs", "platform_monitoring", "control_api", "local_stack"},
    "maintenance_jobs": {"racing_orchestration", "platform_monitoring", "control_api", "local_stack"},
    "platform_monitoring": {"racing_orchestration", "control_api", "local_stack"},
    "control_api": {"racing_orchestration", "local_stack"},
}
# The modules that make a code location: importing one loads (part of) its definitions.
CODE_LOCATIONS = ("racing_orchestration", "maintenance_jobs.definitions", "maintenance_jobs.jobs",
                  "maintenance_jobs.sensors", "maintenance_jobs.resources")
# Packages that must not load a code location by name; platform_monitoring not even through other modules.
NO_CODE_LOCATION = ("control_api", "platform_monitoring")


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


def is_code_location(module: str) -> bool:
    return any(module == root or module.startswith(root + ".") for root in CODE_LOCATIONS)


def dynamic_import_violations(package: str, root: Path = REPO_ROOT) -> list[str]:
    """Imports by string of a code location, or of a name the scan cannot read (a variable: it may be one)."""
    found = []
    for relative, tree in production_modules((package,), root):
        for line, name in dynamic_imports(tree):
            if name is None:
                found.append(f"{relative}:{line} imports a module named at run time")
            elif is_code_location(name):
                found.append(f"{relative}:{line} imports {name}")
    return found


def module_name(relative: str) -> str:
    parts = relative.removesuffix(".py").split("/")
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def imported_modules(tree: ast.Module, name: str, is_package: bool, known: set[str]) -> set[str]:
    """Project modules whose code runs when module `name` is imported: each imported module, its parent packages,
    and `from package import submodule`."""
    found = set()
    for node in ast.walk(tree):
        targets: list[str] = []
        if isinstance(node, ast.Import):
            targets = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = name.split(".") if is_package else name.split(".")[:-1]
                base = base[: len(base) - (node.level - 1)]
                module = ".".join(base + ([node.module] if node.module else []))
            else:
                module = node.module or ""
            targets = [module] + [f"{module}.{alias.name}" for alias in node.names]
        for target in targets:
            parts = target.split(".")
            found |= {".".join(parts[:i]) for i in range(1, len(parts) + 1)} & known
    return found


def code_location_chains(start: str, root: Path = REPO_ROOT,
                         packages: tuple[str, ...] = (*PRODUCTION_PACKAGES, "platform_monitoring")) -> list[str]:
    """Each code location module that importing package `start` loads, with the chain of imports that reaches it."""
    modules = {module_name(relative): (relative, tree) for relative, tree in production_modules(packages, root)}
    known = set(modules)
    edges = {name: imported_modules(tree, name, relative.endswith("__init__.py"), known)
             for name, (relative, tree) in modules.items()}
    parent = {name: None for name in modules if name == start or name.startswith(start + ".")}
    queue = list(parent)
    while queue:
        current = queue.pop(0)
        for target in sorted(edges.get(current, ())):
            if target not in parent:
                parent[target] = current
                queue.append(target)
    chains = []
    for name in sorted(parent):
        if is_code_location(name) and (parent[name] is None or not is_code_location(parent[name])):
            chain, step = [], name
            while step is not None:
                chain.append(step)
                step = parent[step]
            chains.append(" -> ".join(reversed(chain)))
    return chains


@pytest.mark.parametrize("package", NO_CODE_LOCATION)
def test_no_code_location_is_imported_by_name(package: str) -> None:
    assert dynamic_import_violations(package) == []


def test_monitoring_loads_no_code_location_through_any_module() -> None:
    assert code_location_chains("platform_monitoring") == []


@pytest.mark.parametrize("source, expected", [
    ('import importlib\nimportlib.import_module("racing_orchestration.definitions")\n',
     ["imports racing_orchestration.definitions"]),
    ('from importlib import import_module as load\nload("maintenance_jobs.definitions")\n',
     ["imports maintenance_jobs.definitions"]),
    ('__import__("racing_orchestration")\n', ["imports racing_orchestration"]),
    ('import importlib.util\nimportlib.util.find_spec("maintenance_jobs.sensors")\n',
     ["imports maintenance_jobs.sensors"]),
    ('from importlib import util\nutil.find_spec(name="maintenance_jobs.jobs")\n', ["imports maintenance_jobs.jobs"]),
    ('import importlib as il\ngetattr(il, "import_module")(module)\n', ["imports a module named at run time"]),
    ('import importlib\nfor m in ("a.definitions",):\n    importlib.import_module(m)\n',
     ["imports a module named at run time"]),
    ('import importlib\nimportlib.import_module("maintenance_jobs.tags")\n', []),  # a shared module, no location
    ('import importlib\nimportlib.reload(importlib)\n', []),
])
def test_the_scan_sees_a_code_location_imported_by_name(tmp_path: Path, source: str, expected: list[str]) -> None:
    (tmp_path / "platform_monitoring").mkdir()
    (tmp_path / "platform_monitoring" / "m.py").write_text(source)
    found = dynamic_import_violations("platform_monitoring", tmp_path)
    assert [v.split(" ", 1)[1] for v in found] == expected


def test_the_scan_follows_a_chain_of_modules_to_a_code_location(tmp_path: Path) -> None:
    for relative, text in {
        "platform_monitoring/__init__.py": "",
        "platform_monitoring/catalog.py": "from . import helpers\n",
        "platform_monitoring/helpers.py": "from maintenance_jobs import dispatch\n",
        "maintenance_jobs/__init__.py": "",
        "maintenance_jobs/dispatch.py": "from maintenance_jobs.jobs import BUILTIN_JOBS\n",
        "maintenance_jobs/jobs.py": "import dagster\n",
        "maintenance_jobs/tags.py": "",
    }.items():
        (tmp_path / relative).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / relative).write_text(text)
    assert code_location_chains("platform_monitoring", tmp_path, ("platform_monitoring", "maintenance_jobs")) == [
        "platform_monitoring.helpers -> maintenance_jobs.dispatch -> maintenance_jobs.jobs"]
