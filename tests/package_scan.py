"""The production modules, parsed: what the boundary tests (imports, Dagster internals, settings, engines) read, and
the scanners those tests share.

A scanner follows how a name got into the module (`import os as o`, `from os import getenv`, `import sqlalchemy`,
`from sqlalchemy import create_engine as make`) rather than matching one spelling, and each has planted samples of
every form in tests/test_package_scan.py, so a scan that finds nothing means there is nothing to find.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

from tests.conftest import REPO_ROOT

PRODUCTION_PACKAGES = ("orchestration_core", "racing_orchestration", "maintenance_jobs", "platform_monitoring",
                       "control_api")

# What reads the process environment: os.environ / os.environb (any use but assigning or deleting an item) and
# os.getenv / os.getenvb.
ENVIRON_READS = frozenset({"environ", "environb", "getenv", "getenvb"})
# SQLAlchemy's engine factories (orchestration_core.postgres.create_engine is the project's own, and allowed).
ENGINE_FACTORIES = frozenset({"create_engine", "create_async_engine", "engine_from_config", "async_engine_from_config",
                              "create_mock_engine"})


def production_modules(packages: tuple[str, ...] = PRODUCTION_PACKAGES,
                       root: Path = REPO_ROOT) -> Iterator[tuple[str, ast.Module]]:
    """(path relative to `root`, its syntax tree) for every module of `packages` under `root` (the repository, or a
    test's folder of planted samples)."""
    for package in packages:
        for path in sorted((root / package).rglob("*.py")):
            yield path.relative_to(root).as_posix(), parse(path)


def parse(path: Path) -> ast.Module:
    return ast.parse(path.read_text(), filename=str(path))


def _module_aliases(tree: ast.Module, module: str, wanted: frozenset[str]) -> set[str]:
    """Local names bound to `module` or a submodule (`import os`, `import os as o`, `import sqlalchemy.engine`,
    `from sqlalchemy import engine as e`): what `<name>.<wanted>` may be reached through."""
    names = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names |= {alias.asname or alias.name.split(".")[0] for alias in node.names
                      if alias.name == module or alias.name.startswith(module + ".")}
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module and (
                node.module == module or node.module.startswith(module + ".")):
            names |= {alias.asname or alias.name for alias in node.names if alias.name not in wanted}
    return names


def _imported_names(tree: ast.Module, module: str, wanted: frozenset[str]) -> dict[str, str]:
    """Local name -> original name, for `from <module>[.sub] import <wanted> [as local]`."""
    found = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.level == 0 and node.module and (
                node.module == module or node.module.startswith(module + ".")):
            found |= {alias.asname or alias.name: alias.name for alias in node.names if alias.name in wanted}
    return found


def _root_name(node: ast.expr) -> str | None:
    while isinstance(node, ast.Attribute):
        node = node.value
    return node.id if isinstance(node, ast.Name) else None


def _getattr_of(node: ast.AST, modules: set[str], wanted: frozenset[str]) -> bool:
    """`getattr(<module alias>[.x], "<wanted>")`."""
    return (isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "getattr"
            and len(node.args) >= 2 and _root_name(node.args[0]) in modules
            and isinstance(node.args[1], ast.Constant) and node.args[1].value in wanted)


def environ_reads(tree: ast.Module) -> list[int]:
    """Line numbers where the module reads the process environment through `os` (setting or deleting a variable for
    a child process is not a read)."""
    modules = _module_aliases(tree, "os", ENVIRON_READS)
    imported = _imported_names(tree, "os", ENVIRON_READS)
    writes = {id(node.value) for node in ast.walk(tree)
              if isinstance(node, ast.Subscript) and isinstance(node.ctx, ast.Store | ast.Del)}
    lines = []
    for node in ast.walk(tree):
        if id(node) in writes:
            continue
        if isinstance(node, ast.Attribute) and node.attr in ENVIRON_READS and _root_name(node.value) in modules:
            lines.append(node.lineno)
        elif isinstance(node, ast.Name) and node.id in imported and isinstance(node.ctx, ast.Load):
            lines.append(node.lineno)
        elif _getattr_of(node, modules, ENVIRON_READS):
            lines.append(node.lineno)
    return sorted(lines)


def engine_creations(tree: ast.Module) -> list[int]:
    """Line numbers where the module reaches one of SQLAlchemy's engine factories: imported by name, or used as an
    attribute of sqlalchemy (or a submodule) under any alias."""
    modules = _module_aliases(tree, "sqlalchemy", ENGINE_FACTORIES)
    lines = []
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.level == 0 and node.module and (
                node.module == "sqlalchemy" or node.module.startswith("sqlalchemy.")):
            if any(alias.name in ENGINE_FACTORIES for alias in node.names):
                lines.append(node.lineno)
        elif isinstance(node, ast.Attribute) and node.attr in ENGINE_FACTORIES and _root_name(node.value) in modules:
            lines.append(node.lineno)
        elif _getattr_of(node, modules, ENGINE_FACTORIES):
            lines.append(node.lineno)
    return sorted(lines)


def dagster_internal_imports(tree: ast.Module) -> list[int]:
    """Line numbers of imports of Dagster's private modules (`dagster._…`, also `from dagster import _core`)."""
    lines = []
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            if node.module.startswith("dagster._") or (
                    node.module == "dagster" and any(alias.name.startswith("_") for alias in node.names)):
                lines.append(node.lineno)
        elif isinstance(node, ast.Import) and any(alias.name.startswith("dagster._") for alias in node.names):
            lines.append(node.lineno)
    return sorted(lines)


# What imports a module named by a string: importlib.import_module, importlib.__import__ / the builtin __import__,
# importlib.util.find_spec (which imports the parent packages of the name it is given).
DYNAMIC_IMPORTS = frozenset({"import_module", "__import__", "find_spec"})


def dynamic_imports(tree: ast.Module) -> list[tuple[int, str | None]]:
    """(line, module name) of each import by string: `importlib.import_module("x")` under any alias, `from importlib
    import import_module as load`, `importlib.util.find_spec`, `__import__`. The name is None when it is not a string
    literal (a variable, an f-string): what the call imports cannot be read from the source."""
    modules = _module_aliases(tree, "importlib", DYNAMIC_IMPORTS)
    imported = _imported_names(tree, "importlib", DYNAMIC_IMPORTS)
    found = []
    for node in ast.walk(tree):
        if not isinstance(node, ast.Call):
            continue
        func = node.func
        hit = ((isinstance(func, ast.Attribute) and func.attr in DYNAMIC_IMPORTS and _root_name(func.value) in modules)
               or (isinstance(func, ast.Name) and (func.id in imported or func.id == "__import__"))
               or _getattr_of(func, modules, DYNAMIC_IMPORTS))
        if not hit:
            continue
        name = node.args[0] if node.args else next((k.value for k in node.keywords if k.arg in ("name", "fullname")),
                                                   None)
        found.append((node.lineno, name.value if isinstance(name, ast.Constant) and isinstance(name.value, str)
                      else None))
    return sorted(found, key=lambda item: item[0])
