"""The production modules, parsed: what the boundary tests (imports, Dagster internals, settings, engines) read."""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

from tests.conftest import REPO_ROOT

PRODUCTION_PACKAGES = ("orchestration_core", "racing_orchestration", "maintenance_jobs", "control_api")


def production_modules(packages: tuple[str, ...] = PRODUCTION_PACKAGES) -> Iterator[tuple[str, ast.Module]]:
    """(path relative to the repository, its syntax tree) for every module of `packages`."""
    for package in packages:
        for path in sorted((REPO_ROOT / package).rglob("*.py")):
            yield path.relative_to(REPO_ROOT).as_posix(), parse(path)


def parse(path: Path) -> ast.Module:
    return ast.parse(path.read_text(), filename=str(path))
