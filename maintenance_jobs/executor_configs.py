"""The config each built-in executor accepts: one model serves registry validation and the op's run config."""

from __future__ import annotations

import re
from pathlib import Path, PurePosixPath

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from maintenance_jobs import settings
from maintenance_jobs.text_rules import check_label
from maintenance_jobs.upstream_urls import AddressRefused, check_upstream_url

# Used with fullmatch: `$` would also match before a trailing newline.
_SAFE_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]*")


class ConfigRefused(ValueError):
    """A config an executor refuses at run time (the same rules the API applies on write)."""


# --- Doc sync: every value that reaches a git command line ---------------------------------------------------------
# The executor also passes `--` before repositories and paths, but a value git could read as an option is refused
# here first, for every git-facing field, both when a task is written and when a run starts.


def _not_an_option(value: str) -> str:
    if value.startswith("-"):
        raise ValueError(f"{value!r} must not start with '-' (git would read it as an option)")
    return check_label(value)


def check_upstream_repo(value: str) -> str:
    """An https:// URL of a public host by name (on MAINTENANCE_DOC_SYNC_ALLOWED_HOSTS when that is set), port 443,
    no credentials; never a local path, file://, ssh, scp-style or `transport::` remote, an IP address or an inward
    name (upstream_urls). MAINTENANCE_DOC_SYNC_TEST_SCHEMES adds schemes for tests only."""
    _not_an_option(value)
    try:
        return check_upstream_url(
            value,
            allowed_schemes={"https"} | settings.doc_sync_test_schemes(),
            allowed_hosts=settings.doc_sync_allowed_hosts(),
        )
    except AddressRefused as exc:
        raise ValueError(str(exc)) from None


def check_branch(value: str) -> str:
    _not_an_option(value)
    if not value or ".." in value or any(c in value for c in " ~^:?*[\\"):
        raise ValueError(f"{value!r} is not a valid branch name")
    return value


def check_docs_path(raw: str) -> str:
    """A path inside the repository, returned cleaned (no leading/trailing '/')."""
    _not_an_option(raw)
    stripped = raw.strip("/")
    path = PurePosixPath(stripped)
    if not stripped or ".." in path.parts:
        raise ValueError(f"{raw!r} must be a path inside the repository")
    # After stripping too (git sees the cleaned path), and no pathspec magic (":(...)", ":/").
    _not_an_option(stripped)
    if stripped.startswith(":"):
        raise ValueError(f"{raw!r} must not start with ':' (git pathspec magic)")
    return str(path)


def check_gitea_repo(value: str) -> str:
    repo = value.removesuffix(".git")
    parts = repo.split("/")
    if len(parts) != 2 or not all(_SAFE_NAME.fullmatch(p) for p in parts):
        raise ValueError("must be 'owner/name'")
    return repo


class _StrictConfig(BaseModel):
    # Unknown keys are a typo in a task row, not something to ignore silently; and types are strict (`"yes"` is not
    # a boolean, `true` is not a number of days). Plain pydantic, not dg.Config: the ops' schemas are built from these
    # models (run_config_rules.literal_config_schema) and the ops validate with them, and the control API validates
    # task rows with them without importing Dagster. Frozen, as dg.Config is.
    model_config = ConfigDict(extra="forbid", strict=True, frozen=True)


class ExampleConfig(_StrictConfig):
    """example_executor: log `message`, sleep `delay_seconds`, return a message."""

    message: str = "Hello World"
    delay_seconds: float = Field(default=0.0, ge=0, le=3600)

    @field_validator("message")
    @classmethod
    def _showable(cls, value: str) -> str:
        return check_label(value)  # it becomes the run's output tag


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
        if not _SAFE_NAME.fullmatch(value):
            raise ValueError("must be letters, digits, '_', '.' or '-'")
        return value

    @field_validator("upstream_repo")
    @classmethod
    def _upstream(cls, value: str) -> str:
        return check_upstream_repo(value)

    @field_validator("gitea_repo")
    @classmethod
    def _owner_slash_name(cls, value: str) -> str:
        return check_gitea_repo(value)

    @field_validator("docs_paths")
    @classmethod
    def _relative_paths(cls, value: list[str]) -> list[str]:
        return [check_docs_path(raw) for raw in value]

    @field_validator("branch", "target_branch")
    @classmethod
    def _branch_name(cls, value: str) -> str:
        return check_branch(value)


def check_doc_sync_config(config: DocSyncConfig) -> DocSyncConfig:
    """The run-time check: validate the config again under this process's settings; ConfigRefused names the field."""
    try:
        return DocSyncConfig.model_validate(
            {name: getattr(config, name) for name in DocSyncConfig.model_fields}
        )
    except ValidationError as exc:
        error = exc.errors()[0]
        field = ".".join(str(part) for part in error["loc"])
        raise ConfigRefused(f"doc sync config refused: {field}: {error['msg'].removeprefix('Value error, ')}") from None


# --- Config backup: what may be read and where archives may be written --------------------------------------------


def check_under_roots(raw: str, roots: tuple[Path, ...], setting: str) -> Path:
    """`raw` resolved (symlinks followed, `..` collapsed), or ValueError unless that lies under one of `roots`."""
    path = Path(raw)
    if not path.is_absolute():
        raise ValueError(f"{raw!r} must be an absolute path")
    try:
        resolved = path.resolve()
        for root in roots:
            real_root = root.resolve()
            if resolved == real_root or real_root in resolved.parents:
                return resolved
    except (OSError, ValueError, RuntimeError):  # NUL byte, symlink loop, unreadable
        raise ValueError(f"{raw!r} cannot be resolved") from None
    raise ValueError(f"{raw!r} must resolve under {', '.join(str(r) for r in roots)} (set by {setting})")


def source_path(raw: str) -> Path:
    return check_under_roots(raw, settings.backup_source_roots(), "MAINTENANCE_BACKUP_SOURCE_ROOTS")


def target_path(raw: str) -> Path:
    return check_under_roots(raw, settings.backup_target_roots(), "MAINTENANCE_BACKUP_TARGET_ROOTS")


class BackupSource(_StrictConfig):
    path: str = Field(min_length=1)
    name: str
    excludes: list[str] = []  # globs against the path relative to the source (and the file name)

    @field_validator("excludes")
    @classmethod
    def _showable_globs(cls, value: list[str]) -> list[str]:
        return [check_label(glob) for glob in value]

    @field_validator("path")
    @classmethod
    def _under_source_roots(cls, value: str) -> str:
        source_path(value)
        return value  # stored as given; the run resolves it again

    @field_validator("name")
    @classmethod
    def _archive_safe_name(cls, value: str) -> str:
        # Archive names are <task>__<source>__<stamp>; "__" inside a source name would blur whose archive is whose.
        if not _SAFE_NAME.fullmatch(value) or "__" in value:
            raise ValueError("must be letters, digits, '_', '.' or '-' (no '__')")
        return value


class ConfigBackupConfig(_StrictConfig):
    """config_backup_executor: one archive per source into `backup_dir`, keeping `retention_days` of history.

    Files with more than one hard link are skipped (and reported) unless `include_hard_links`: a hard link under a
    source root can name a file that lives anywhere on the same file system."""

    sources: list[BackupSource] = Field(min_length=1)
    backup_dir: str = Field(min_length=1)
    compress: bool = True
    retention_days: int = Field(default=30, ge=1, le=3650)
    include_hard_links: bool = False

    @field_validator("sources")
    @classmethod
    def _unique_names(cls, value: list[BackupSource]) -> list[BackupSource]:
        names = [s.name for s in value]
        if len(set(names)) != len(names):
            raise ValueError("source names must be unique")
        return value

    @field_validator("backup_dir")
    @classmethod
    def _under_target_roots(cls, value: str) -> str:
        target_path(value)
        return value


# Archives are written as `.<task>__<source>__<stamp>.tar.gz.<8 random>.partial`, then renamed; one file name
# holds at most 255 bytes on the file systems a homelab uses.
MAX_FILE_NAME_BYTES = 255
_ARCHIVE_NAME_OVERHEAD = len(".__" + "__" + "20250101T000000Z" + ".tar.gz" + ".abcdefgh" + ".partial")


def archive_name_problem(task_name: str, config: ConfigBackupConfig) -> tuple[int, str] | None:
    """(source index, message) when a source's archive file name would be too long for the file system."""
    for index, source in enumerate(config.sources):
        size = len(task_name.encode()) + len(source.name.encode()) + _ARCHIVE_NAME_OVERHEAD
        if size > MAX_FILE_NAME_BYTES:
            return index, (f"archive file names of source {source.name!r} would be {size} bytes, over the limit of "
                           f"{MAX_FILE_NAME_BYTES}: shorten the task or source name")
    return None


def resolved_backup_paths(config: ConfigBackupConfig) -> tuple[list[Path], Path]:
    """The run-time check: each source and backup_dir resolved now, under this process's roots (symlinks planted
    since the task was written included); ConfigRefused names the field."""
    sources = []
    for index, source in enumerate(config.sources):
        try:
            sources.append(source_path(source.path))
        except ValueError as exc:
            raise ConfigRefused(f"backup config refused: sources.{index}.path: {exc}") from None
    try:
        backup_dir = target_path(config.backup_dir)
    except ValueError as exc:
        raise ConfigRefused(f"backup config refused: backup_dir: {exc}") from None
    return sources, backup_dir


# --- Postgres backup: which of the deployment's databases, and where the dumps go --------------------------------

# The deployment's three databases by short name, each dumped with the URL of its own setting (never a URL from a
# task config): Dagster's run/event storage (the audit trail), the race data and this task registry.
POSTGRES_DATABASES = ("dagster", "racing", "maintenance")
DEFAULT_POSTGRES_BACKUP_DIR = "/backups/postgres"
# The asset each database's successful dumps are recorded under (`postgres_backup/<database>`): the control API's
# maintenance_postgres_backup_last_success_timestamp_seconds{database} is its newest materialization.
POSTGRES_BACKUP_ASSET_PREFIX = "postgres_backup"


class PostgresBackupConfig(_StrictConfig):
    """postgres_backup_executor: `pg_dump -Fc` of each named database into `backup_dir`, a `.sha256` beside each
    dump, and this task's dumps older than `keep_days` deleted."""

    databases: list[str] = Field(default=list(POSTGRES_DATABASES), min_length=1)
    backup_dir: str = DEFAULT_POSTGRES_BACKUP_DIR
    keep_days: int = Field(default=14, ge=1, le=3650)
    timeout_seconds: int = Field(default=3600, ge=1, le=86400)  # per database

    @field_validator("databases")
    @classmethod
    def _known_databases(cls, value: list[str]) -> list[str]:
        for name in value:
            if name not in POSTGRES_DATABASES:
                raise ValueError(f"{check_label(name)!r} is not one of this deployment's databases "
                                 f"({', '.join(POSTGRES_DATABASES)})")
        if len(set(value)) != len(value):
            raise ValueError("each database at most once")
        return value

    @field_validator("backup_dir")
    @classmethod
    def _under_target_roots(cls, value: str) -> str:
        target_path(value)
        return value


def resolved_postgres_backup_dir(config: PostgresBackupConfig) -> Path:
    """The run-time check of backup_dir: resolved now, under this process's roots; ConfigRefused names the field."""
    try:
        return target_path(config.backup_dir)
    except ValueError as exc:
        raise ConfigRefused(f"postgres backup config refused: backup_dir: {exc}") from None


class PluginRunConfig(_StrictConfig):
    """Run config of the plug-in job: which plug-in, and the task's config as JSON (plug-in configs are free-form)."""

    executor: str
    config_json: str = "{}"


BUILTIN_CONFIGS: dict[str, type[_StrictConfig]] = {
    "example_executor": ExampleConfig,
    "doc_sync_executor": DocSyncConfig,
    "config_backup_executor": ConfigBackupConfig,
    "postgres_backup_executor": PostgresBackupConfig,
}
