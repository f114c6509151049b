"""The config each built-in executor accepts: one model serves registry validation and the op's run config."""

from __future__ import annotations

import re
from pathlib import PurePosixPath

import dagster as dg
from pydantic import ConfigDict, Field, field_validator

_SAFE_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]*$")


class _StrictConfig(dg.Config):
    # Unknown keys are a typo in a task row, not something to ignore silently.
    model_config = ConfigDict(extra="forbid")


class ExampleConfig(_StrictConfig):
    """example_executor: log `message`, sleep `delay_seconds`, return a message."""

    message: str = "Hello World"
    delay_seconds: float = Field(default=0.0, ge=0, le=3600)


class DocSyncConfig(_StrictConfig):
    """doc_sync_executor: mirror `docs_paths` of `upstream_repo` into the Gitea repository `gitea_repo`."""

    project: str = Field(min_length=1)
    upstream_repo: str = Field(min_length=1)
    docs_paths: list[str] = []  # empty = the whole repository
    gitea_repo: str  # owner/name on the Gitea server
    branch: str = "main"  # upstream branch to mirror
    target_branch: str = "main"

    @field_validator("project")
    @classmethod
    def _project_is_a_name(cls, value: str) -> str:
        if not _SAFE_NAME.match(value):
            raise ValueError("must be letters, digits, '_', '.' or '-'")
        return value

    @field_validator("gitea_repo")
    @classmethod
    def _owner_slash_name(cls, value: str) -> str:
        parts = value.removesuffix(".git").split("/")
        if len(parts) != 2 or not all(_SAFE_NAME.match(p) for p in parts):
            raise ValueError("must be 'owner/name'")
        return value.removesuffix(".git")

    @field_validator("docs_paths")
    @classmethod
    def _relative_paths(cls, value: list[str]) -> list[str]:
        cleaned = []
        for raw in value:
            path = PurePosixPath(raw.strip("/"))
            if not raw.strip("/") or ".." in path.parts:
                raise ValueError(f"{raw!r} must be a path inside the repository")
            cleaned.append(str(path))
        return cleaned

    @field_validator("branch", "target_branch")
    @classmethod
    def _branch_name(cls, value: str) -> str:
        if not value or value.startswith("-") or ".." in value or any(c in value for c in " ~^:?*[\\"):
            raise ValueError(f"{value!r} is not a valid branch name")
        return value


class BackupSource(_StrictConfig):
    path: str = Field(min_length=1)
    name: str
    excludes: list[str] = []  # globs against the path relative to the source (and the file name)

    @field_validator("name")
    @classmethod
    def _archive_safe_name(cls, value: str) -> str:
        # Archive names are <task>__<source>__<stamp>; "__" inside a source name would blur whose archive is whose.
        if not _SAFE_NAME.match(value) or "__" in value:
            raise ValueError("must be letters, digits, '_', '.' or '-' (no '__')")
        return value


class ConfigBackupConfig(_StrictConfig):
    """config_backup_executor: one archive per source into `backup_dir`, keeping `retention_days` of history."""

    sources: list[BackupSource] = Field(min_length=1)
    backup_dir: str = Field(min_length=1)
    compress: bool = True
    retention_days: int = Field(default=30, ge=1, le=3650)

    @field_validator("sources")
    @classmethod
    def _unique_names(cls, value: list[BackupSource]) -> list[BackupSource]:
        names = [s.name for s in value]
        if len(set(names)) != len(names):
            raise ValueError("source names must be unique")
        return value


class PluginRunConfig(_StrictConfig):
    """Run config of the plug-in job: which plug-in, and the task's config as JSON (plug-in configs are free-form)."""

    executor: str
    config_json: str = "{}"


BUILTIN_CONFIGS: dict[str, type[_StrictConfig]] = {
    "example_executor": ExampleConfig,
    "doc_sync_executor": DocSyncConfig,
    "config_backup_executor": ConfigBackupConfig,
}
