"""`make install` leaves the virtualenv's packages compiled.

This machine's environment sets PYTHONDONTWRITEBYTECODE=1, so Python never writes bytecode when it imports a
module. uv does not compile at install unless asked (pip does). Without compiled packages, every process in the
suite (workers, code servers, CLI commands, local run workers) compiled Dagster again from source:
`import dagster` took 2.6-3.1 CPU-s instead of 1.0-1.4, and loading the racing location ~5.9 instead of ~3.0
(BENCHMARKS.md "Process start-up")."""

import importlib.util
from pathlib import Path

import pytest

pytestmark = pytest.mark.unit


@pytest.mark.parametrize("module", ["dagster", "dagster._core.definitions.definitions_class", "sqlalchemy.orm",
                                    "httpx", "pyarrow"])
def test_the_installed_packages_are_compiled(module: str) -> None:
    source = importlib.util.find_spec(module).origin
    cached = Path(importlib.util.cache_from_source(source))
    assert cached.is_file(), f"{module} has no bytecode at {cached}: install with `uv pip install --compile-bytecode`"
