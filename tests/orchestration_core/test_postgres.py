"""The one engine factory: every engine on psycopg2 with the pool of its use, and no other module creating engines."""

from __future__ import annotations

import ast

import pytest
import sqlalchemy as sa

from orchestration_core.postgres import POOLS, create_engine
from tests.package_scan import production_modules

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


def test_no_other_production_module_creates_engines() -> None:
    creators = [relative for relative, tree in production_modules() if relative != "orchestration_core/postgres.py"
                for node in ast.walk(tree)
                if isinstance(node, ast.Attribute) and node.attr == "create_engine"
                and isinstance(node.value, ast.Name) and node.value.id == "sa"]
    assert creators == []
