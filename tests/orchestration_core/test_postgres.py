"""The one engine factory: every engine on psycopg2 with the pool of its use, and no other module creating engines."""

from __future__ import annotations

from pathlib import Path

import pytest
import sqlalchemy as sa

from orchestration_core.postgres import POOLS, create_engine
from tests.conftest import REPO_ROOT
from tests.package_scan import engine_creations, production_modules

pytestmark = pytest.mark.unit


@pytest.mark.parametrize("use", sorted(POOLS))
def test_each_use_gets_its_pool(use: str) -> None:
    engine = create_engine("postgresql://u:p@127.0.0.1:1/db", use)
    try:
        assert engine.url.drivername == "postgresql+psycopg2"
        pool = POOLS[use]
        if pool.size is None:
            assert isinstance(engine.pool, sa.pool.NullPool)
        else:
            assert (engine.pool.size(), engine.pool._max_overflow) == (pool.size, pool.max_overflow)
            assert engine.pool._pre_ping is True
    finally:
        engine.dispose()


def test_an_unknown_use_is_refused() -> None:
    with pytest.raises(KeyError):
        create_engine("postgresql://u@h/db", "mystery")


def engine_creators(root: Path = REPO_ROOT) -> set[str]:
    """Production modules that reach SQLAlchemy's engine factories (tests.package_scan.engine_creations)."""
    return {relative for relative, tree in production_modules(root=root) if engine_creations(tree)}


def test_no_other_production_module_creates_engines() -> None:
    # Equal, not a subset: the factory itself is found, so the scan is looking at the real modules.
    assert engine_creators() == {"orchestration_core/postgres.py"}


def test_the_scan_finds_an_engine_planted_in_a_package(tmp_path: Path) -> None:
    (tmp_path / "maintenance_jobs").mkdir()
    (tmp_path / "maintenance_jobs" / "planted.py").write_text(
        "from sqlalchemy import create_engine\n\nENGINE = create_engine('postgresql://h/d')\n")
    (tmp_path / "maintenance_jobs" / "clean.py").write_text(
        "from orchestration_core.postgres import create_engine\n\nENGINE = create_engine('postgresql://h/d', 'api')\n")
    assert engine_creators(tmp_path) == {"maintenance_jobs/planted.py"}
