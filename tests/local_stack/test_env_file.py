"""`.local/env`, which `make run` writes for a second terminal: export lines a shell reads back to the same values,
in a file only its owner can read (it carries database URLs with their passwords)."""

import os
import stat
import subprocess

import pytest

from local_stack.stack import ENV_FILE_VARIABLES, env_file_text, write_private_file

pytestmark = pytest.mark.unit

STACK_ENV = {
    "DAGSTER_HOME": "/home/a user/repo/.local/dagster_home",
    "DAGSTER_POSTGRES_URL": "postgresql+psycopg2://postgres:p'a$s\"w`d@127.0.0.1:5433/dagster",
    "RACING_DATABASE_URL": "postgresql+psycopg2://postgres:pw@127.0.0.1:5433/racing",
    "MAINTENANCE_DATABASE_URL": "postgresql+psycopg2://postgres:pw@127.0.0.1:5433/maintenance",
    "TAB_API_BASE_URL": "http://127.0.0.1:8765/affiliates/v1/racing",
    "RACING_EXPORT_DIR": "/home/a user/repo/.local/exports",
    "DAGSTER_UI_URL": "http://127.0.0.1:3000",
    "PATH": "/usr/bin", "HOME": "/root",  # the rest of the supervisor's environment stays out
}


def sourced(path) -> dict[str, str]:
    """The variables a fresh bash has after `source path` (nothing inherited but PATH)."""
    names = " ".join(STACK_ENV)
    script = (f'source "$1" && for n in {names}; do if [ "$n" != PATH ] && [ -n "${{!n+x}}" ]; then '
              'printf "%s=%s\\0" "$n" "${!n}"; fi; done')
    out = subprocess.run(["bash", "--noprofile", "--norc", "-c", script, "bash", str(path)],
                         env={"PATH": "/usr/bin:/bin"}, capture_output=True, text=True, check=True).stdout
    return dict(item.split("=", 1) for item in out.split("\0") if item)


def test_a_shell_reads_back_every_stack_variable_as_written(tmp_path) -> None:
    path = tmp_path / "env"
    write_private_file(path, env_file_text(STACK_ENV, ENV_FILE_VARIABLES))
    expected = {k: v for k, v in STACK_ENV.items() if k not in ("PATH", "HOME")}
    assert sourced(path) == expected


@pytest.mark.parametrize("value", ["", None])
def test_an_unset_or_empty_variable_is_left_out(value) -> None:
    env = {"DAGSTER_HOME": "/x"} | ({"SCHEDULER_API_KEY": value} if value is not None else {})
    text = env_file_text(env, ENV_FILE_VARIABLES)
    assert "export DAGSTER_HOME=/x" in text and "SCHEDULER_API_KEY" not in text


@pytest.mark.parametrize("before", [None, 0o644, 0o666])
def test_the_file_is_readable_by_its_owner_only(tmp_path, before) -> None:
    path = tmp_path / "env"
    if before is not None:  # an older file, world-readable
        path.write_text("old")
        os.chmod(path, before)
    write_private_file(path, "export A=1\n")
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert path.read_text() == "export A=1\n"
