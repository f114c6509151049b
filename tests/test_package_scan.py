"""The source scanners behind the boundary tests find every spelling of what they look for, and only that: a planted
sample of each form is caught (on the line it is on), and the forms that are allowed are not."""

from __future__ import annotations

import ast
import textwrap

import pytest

from tests.package_scan import dagster_internal_imports, engine_creations, environ_reads

pytestmark = pytest.mark.unit


def _tree(source: str) -> ast.Module:
    return ast.parse(textwrap.dedent(source))


@pytest.mark.parametrize(
    ("source", "lines"),
    [
        ("import os\nos.environ['TAB_URL']\n", [2]),
        ("import os\nos.environ.get('TAB_URL')\n", [2]),
        ("import os\nos.getenv('TAB_URL')\n", [2]),
        ("import os\nos.getenvb(b'TAB_URL')\n", [2]),
        ("import os\nos.environb[b'TAB_URL']\n", [2]),
        ("import os as system\nsystem.getenv('TAB_URL')\n", [2]),
        ("import os.path\nos.environ.get('TAB_URL')\n", [2]),
        ("from os import getenv\ngetenv('TAB_URL')\n", [2]),
        ("from os import getenv as env\nenv('TAB_URL')\n", [2]),
        ("from os import environ\nenviron.get('TAB_URL')\n", [2]),
        ("from os import environ\nenviron['TAB_URL']\n", [2]),
        ("from os import environ as e\nx = dict(e)\n", [2]),
        ("import os\nsubprocess_env = {**os.environ}\n", [2]),
        ("import os\ngetattr(os, 'environ')\n", [2]),
        ("def f():\n    import os\n    return os.environ.get('X')\n", [3]),
    ],
)
def test_environ_reads_are_found_in_every_form(source: str, lines: list[int]) -> None:
    assert environ_reads(_tree(source)) == lines


@pytest.mark.parametrize(
    "source",
    [
        "import os\nos.environ['CHILD'] = '1'\n",  # set for a child process: not a read
        "import os\ndel os.environ['CHILD']\n",
        "from os import environ\nenviron['CHILD'] = '1'\n",
        "import os\nos.path.join('a', 'b')\n",
        "environ = {}\nenviron.get('X')\n",  # a local dict named environ, not the process's
        "from settings import getenv\ngetenv('X')\n",
    ],
)
def test_what_is_not_an_environ_read(source: str) -> None:
    assert environ_reads(_tree(source)) == []


@pytest.mark.parametrize(
    ("source", "lines"),
    [
        ("import sqlalchemy as sa\nsa.create_engine('postgresql://h/d')\n", [2]),
        ("import sqlalchemy\nsqlalchemy.create_engine('postgresql://h/d')\n", [2]),
        ("import sqlalchemy.engine\nsqlalchemy.engine.create_engine('postgresql://h/d')\n", [2]),
        ("import sqlalchemy as db\ndb.engine_from_config({})\n", [2]),
        ("from sqlalchemy import create_engine\ncreate_engine('postgresql://h/d')\n", [1]),
        ("from sqlalchemy import create_engine as make\nmake('postgresql://h/d')\n", [1]),
        ("from sqlalchemy.engine import create_engine\n", [1]),
        ("from sqlalchemy.ext.asyncio import create_async_engine\n", [1]),
        ("from sqlalchemy import engine\nengine.create_engine('postgresql://h/d')\n", [2]),
        ("import sqlalchemy as sa\ngetattr(sa, 'create_engine')('postgresql://h/d')\n", [2]),
        ("def f():\n    import sqlalchemy as sa\n    return sa.create_engine('x')\n", [3]),
    ],
)
def test_engine_creations_are_found_in_every_form(source: str, lines: list[int]) -> None:
    assert engine_creations(_tree(source)) == lines


@pytest.mark.parametrize(
    "source",
    [
        "from orchestration_core.postgres import create_engine\ncreate_engine('postgresql://h/d', 'api')\n",
        "from orchestration_core import postgres\npostgres.create_engine('postgresql://h/d', 'api')\n",
        "import sqlalchemy as sa\nsa.select(sa.text('1'))\n",
    ],
)
def test_the_project_engine_factory_is_not_an_engine_creation(source: str) -> None:
    assert engine_creations(_tree(source)) == []


@pytest.mark.parametrize(
    ("source", "lines"),
    [
        ("from dagster._core.storage.tags import RUN_KEY_TAG\n", [1]),
        ("import dagster._check\n", [1]),
        ("import dagster._core.storage as storage\n", [1]),
        ("from dagster import _check as check\n", [1]),
        ("from dagster import DagsterInstance, _core\n", [1]),
        ("def f():\n    from dagster._daemon.types import DaemonHeartbeat\n", [2]),
    ],
)
def test_dagster_internal_imports_are_found_in_every_form(source: str, lines: list[int]) -> None:
    assert dagster_internal_imports(_tree(source)) == lines


@pytest.mark.parametrize("source", ["import dagster as dg\n", "from dagster import DagsterInstance, RunsFilter\n",
                                    "from dagster_postgres import PostgresRunStorage\n"])
def test_public_dagster_imports_are_not_internal(source: str) -> None:
    assert dagster_internal_imports(_tree(source)) == []
