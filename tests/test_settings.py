"""Every environment variable the code reads is a field of exactly one package's settings object, read nowhere else,
and README's configuration table lists exactly those (less the internal ones)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from pydantic import AliasChoices

from control_api.config import ApiSettings
from maintenance_jobs.settings import MaintenanceSettings
from orchestration_core.settings import PlatformSettings
from racing_orchestration.settings import RacingSettings
from tests.conftest import REPO_ROOT
from tests.package_scan import environ_reads, production_modules

pytestmark = pytest.mark.unit

SETTINGS = (PlatformSettings, RacingSettings, MaintenanceSettings, ApiSettings)
# Read by the test suite, not by the product.
README_ONLY = {"TEST_DATABASE_URL"}
# Reads of the environment that are not settings: the doc-sync executor hands its environment to git; the daemon's
# healthcheck runs as a lone file in the Dagster image (no settings package there) and reads Dagster's own
# DAGSTER_POSTGRES_URL, as deploy/dagster.yaml does; the instance's storage class is such a lone file too, loaded by
# Dagster in every process, and reads DAGSTER_STORAGE_KEEP_CONNECTIONS, which only the daemon's container sets; the CLIs'
# check of which variables a command will need is set, before it runs (a presence check, not a setting); the daemon's
# memory guard is a lone stdlib file in the Dagster image too, the daemon's command, and reads its bound
# MEMORY_GUARD_RESTART_ABOVE_MIB, which only the daemon's container sets (and hands the command its environment).
ENVIRON_READERS = {"maintenance_jobs/executors/doc_sync.py", "orchestration_core/daemon_probe.py",
                   "orchestration_core/pooled_storage.py", "orchestration_core/cli_environment.py",
                   "orchestration_core/memory_guard.py"}


def env_names(settings_class) -> dict[str, str]:
    """Variable name -> its field's description, for fields the environment can set."""
    names = {}
    for name, field in settings_class.model_fields.items():
        if field.exclude:
            continue  # not from the environment (a test seam, or a platform setting copied in)
        alias = field.validation_alias
        variable = (next(a for a in alias.choices if a.upper() == a) if isinstance(alias, AliasChoices)
                    else name.upper())
        names[variable] = field.description or ""
    return names


def all_env_names() -> list[str]:
    return [name for cls in SETTINGS for name in env_names(cls)]


def test_every_variable_is_declared_once() -> None:
    names = all_env_names()
    assert sorted({n for n in names if names.count(n) > 1}) == []
    assert len(names) >= 20


def test_every_field_is_documented() -> None:
    undocumented = [(cls.__name__, name) for cls in SETTINGS for name, description in env_names(cls).items()
                    if not description]
    assert undocumented == []


def readme_variables() -> set[str]:
    text = (REPO_ROOT / "README.md").read_text()
    table = text.split("## Configuration", 1)[1].split("\n## ", 1)[0]
    found = set()
    for line in table.splitlines():
        if line.startswith("| `"):
            found |= set(re.findall(r"`([A-Z][A-Z0-9_]+)`", line.split("|")[1]))
    return found


def test_readme_table_lists_exactly_the_settings() -> None:
    public = {name for cls in SETTINGS for name, description in env_names(cls).items()
              if not description.startswith("internal:")}
    assert readme_variables() - README_ONLY == public


def environ_readers(root: Path = REPO_ROOT) -> set[str]:
    """Production modules that read the process environment themselves (tests.package_scan.environ_reads)."""
    return {relative for relative, tree in production_modules(root=root) if environ_reads(tree)}


def test_settings_are_read_only_through_the_settings_objects() -> None:
    # Equal, not a subset: the one known reader is found, so the scan is looking at the real modules.
    assert environ_readers() == ENVIRON_READERS


def test_the_scan_finds_a_reader_planted_in_a_package(tmp_path: Path) -> None:
    (tmp_path / "racing_orchestration" / "tab").mkdir(parents=True)
    (tmp_path / "racing_orchestration" / "tab" / "planted.py").write_text(
        "from os import getenv\n\n\ndef url():\n    return getenv('TAB_URL')\n")
    (tmp_path / "control_api").mkdir()
    (tmp_path / "control_api" / "clean.py").write_text("import os\n\nos.environ['CHILD_ONLY'] = '1'\n")
    assert environ_readers(tmp_path) == {"racing_orchestration/tab/planted.py"}


def test_empty_values_count_as_unset(monkeypatch: pytest.MonkeyPatch) -> None:
    # compose passes every variable of .env through, empty when unused
    monkeypatch.setenv("RACING_TIMEZONE", "")
    monkeypatch.setenv("MAINTENANCE_TIMEZONE", "")
    assert PlatformSettings().racing_timezone == "Pacific/Auckland"
    assert MaintenanceSettings().timezone == "Pacific/Auckland"
    monkeypatch.setenv("RACING_TIMEZONE", "UTC")
    assert MaintenanceSettings().timezone == "UTC"
