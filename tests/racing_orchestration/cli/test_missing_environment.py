"""A `racing` or `maintenance` command without its environment says in one line which variable is missing and how to
get it, and exits 2 with no traceback, before touching any database.

Every other variable is set (the databases' URLs to a port nothing listens on), so only the missing one can stop the
command."""

import shutil
import subprocess
import sys

import pytest

from maintenance_jobs import cli as maintenance_cli
from orchestration_core.cli_environment import env_references, first_missing, instance_variables
from racing_orchestration import cli as racing_cli
from tests.conftest import REPO_ROOT

pytestmark = pytest.mark.unit
NOWHERE = "postgresql+psycopg2://nobody:secret@127.0.0.1:9/none"
INSTANCE = ("DAGSTER_HOME", "DAGSTER_POSTGRES_URL")
CHECK = ["check", "123", "--checkpoint", "t15"]

# (CLI, arguments, the variables the command needs)
COMMANDS = [
    ("racing", ["audit"], INSTANCE),
    ("racing", ["audit", "--retries", "--json"], INSTANCE),
    ("racing", ["cleanup", "--dry-run"], INSTANCE),
    ("racing", ["scrape", "--detach"], INSTANCE),
    ("racing", ["scrape", "--in-process"], (*INSTANCE, "RACING_DATABASE_URL")),
    ("racing", CHECK, INSTANCE),
    ("racing", [*CHECK, "--in-process"], (*INSTANCE, "RACING_DATABASE_URL")),
    ("racing", ["verify-checks", "--json"], (*INSTANCE, "RACING_DATABASE_URL")),
    ("racing", ["db", "upgrade"], ("RACING_DATABASE_URL",)),
    ("racing", ["db", "current"], ("RACING_DATABASE_URL",)),
    ("maintenance", ["db", "upgrade"], ("MAINTENANCE_DATABASE_URL",)),
    ("maintenance", ["seed"], ("MAINTENANCE_DATABASE_URL",)),
    # DAGSTER_HOME is optional for history (it then leaves out runs not recorded yet); once set, its instance's
    # variables are needed.
    ("maintenance", ["history", "hello"], ("MAINTENANCE_DATABASE_URL", "DAGSTER_POSTGRES_URL")),
]
ROWS = [pytest.param(tool, args, name, id=f"{tool} {' '.join(args)} without {name}")
        for tool, args, names in COMMANDS for name in names]


@pytest.fixture
def full_environment(tmp_path, monkeypatch) -> dict[str, str]:
    home = tmp_path / "dagster_home"
    home.mkdir()
    shutil.copyfile(REPO_ROOT / "dagster.yaml", home / "dagster.yaml")
    values = {"DAGSTER_HOME": str(home), "DAGSTER_POSTGRES_URL": NOWHERE, "RACING_DATABASE_URL": NOWHERE,
              "MAINTENANCE_DATABASE_URL": NOWHERE, "TAB_API_BASE_URL": "http://127.0.0.1:9/affiliates/v1/racing",
              "DAGSTER_UI_URL": "http://127.0.0.1:9"}
    for name, value in values.items():
        monkeypatch.setenv(name, value)
    return values


def run_cli(tool: str, args: list[str]) -> int:
    main = racing_cli.main if tool == "racing" else maintenance_cli.main
    try:
        return main(args)
    except SystemExit as exc:
        return exc.code if isinstance(exc.code, int) else 1


@pytest.mark.parametrize(("tool", "args", "name"), ROWS)
def test_a_command_without_its_variable_names_it_in_one_line_and_exits_2(
        tool, args, name, full_environment, monkeypatch, capsys) -> None:
    monkeypatch.delenv(name)
    code = run_cli(tool, args)  # an exception here (Dagster's config error, a refused connection) fails the row
    err = capsys.readouterr().err
    assert code == 2, err
    assert err.count("\n") == 1, err
    assert f"{name} is not set: run `source .local/env`" in err and err.startswith(f"{tool} {args[0]}"), err


@pytest.mark.parametrize("empty", ["", "unset"])
def test_an_empty_variable_counts_as_missing(empty, full_environment, monkeypatch, capsys) -> None:
    if empty == "unset":
        monkeypatch.delenv("DAGSTER_POSTGRES_URL")
    else:
        monkeypatch.setenv("DAGSTER_POSTGRES_URL", "")
    assert run_cli("racing", ["audit"]) == 2
    assert "DAGSTER_POSTGRES_URL is not set" in capsys.readouterr().err


def test_the_console_script_prints_no_traceback(full_environment) -> None:
    env = {k: v for k, v in full_environment.items() if k != "DAGSTER_POSTGRES_URL"}
    env["PATH"] = "/usr/bin:/bin"
    done = subprocess.run([sys.executable, "-m", "racing_orchestration.cli", "audit"], cwd=REPO_ROOT, env=env,
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 2, done.stderr[-3000:]
    assert "Traceback" not in done.stderr
    assert done.stderr.strip().splitlines()[-1].startswith("racing audit: DAGSTER_POSTGRES_URL is not set: "), \
        done.stderr[-3000:]


@pytest.mark.parametrize(("config", "names"), [
    ({"storage": {"postgres": {"postgres_url": {"env": "DAGSTER_POSTGRES_URL"}}}}, ["DAGSTER_POSTGRES_URL"]),
    ({"storage": {"postgres": {"postgres_db": {"username": {"env": "U"}, "password": {"env": "P"}}}},
      "x": [{"env": "U"}]}, ["U", "P"]),
    ({"env": {"nested": 1}}, []),  # a key named env holding a mapping is not a reference
    (None, []),
])
def test_env_references_of_an_instance_config(config, names) -> None:
    assert env_references(config) == names


def test_the_instance_variables_come_from_its_dagster_yaml(tmp_path) -> None:
    assert instance_variables({}) == ["DAGSTER_HOME"]
    assert instance_variables({"DAGSTER_HOME": str(tmp_path)}) == ["DAGSTER_HOME"]  # no dagster.yaml there
    (tmp_path / "dagster.yaml").write_text((REPO_ROOT / "dagster.yaml").read_text())
    assert instance_variables({"DAGSTER_HOME": str(tmp_path)}) == ["DAGSTER_HOME", "DAGSTER_POSTGRES_URL"]
    assert first_missing(["A", "B"], {"A": "x", "B": ""}) == "B" and first_missing(["A"], {"A": "x"}) is None
