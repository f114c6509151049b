"""config_backup_executor: one tar(.gz) per source, written atomically, with per-task retention.

Archives are named `<task>__<source>__<YYYYMMDDTHHMMSSZ>.tar[.gz]`; retention only ever deletes archives whose name
carries this task's name and one of its source names, so tasks sharing a backup_dir never delete each other's files.
"""

from __future__ import annotations

import datetime as dt
import fnmatch
import logging
import os
import re
import stat
import tarfile
import tempfile
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from maintenance_jobs.executor_configs import (
    BackupSource,
    ConfigBackupConfig,
    ConfigRefused,
    archive_name_problem,
    resolved_backup_paths,
)

_STAMP_FORMAT = "%Y%m%dT%H%M%SZ"


class BackupRefused(ConfigRefused):
    """The config cannot be backed up safely (outside the roots, missing source, backup_dir inside a source)."""


@dataclass
class SourceResult:
    name: str
    archive: str | None = None
    size_bytes: int = 0
    files: int = 0
    files_vanished: int = 0
    hard_links_skipped: list[str] = field(default_factory=list)  # relative paths left out (more than one link)
    error: str | None = None


@dataclass
class BackupResult:
    sources: list[SourceResult] = field(default_factory=list)
    deleted: list[str] = field(default_factory=list)

    @property
    def failed(self) -> list[SourceResult]:
        return [s for s in self.sources if s.error]

    @property
    def message(self) -> str:
        ok = [s for s in self.sources if not s.error]
        size = sum(s.size_bytes for s in ok)
        text = f"backed up {len(ok)}/{len(self.sources)} sources, {sum(s.files for s in ok)} files, {size} bytes"
        skipped = sum(len(s.hard_links_skipped) for s in ok)
        if skipped:
            text += f"; skipped {skipped} hard-linked files (include_hard_links is off)"
        if self.deleted:
            text += f"; deleted {len(self.deleted)} expired archives"
        if self.failed:
            text += "; failed: " + "; ".join(f"{s.name}: {s.error}" for s in self.failed)
        return text


def archive_name(task_name: str, source: str, at: dt.datetime, compress: bool) -> str:
    return f"{task_name}__{source}__{at.astimezone(dt.UTC).strftime(_STAMP_FORMAT)}.tar{'.gz' if compress else ''}"


def is_excluded(relative: str, patterns: list[str]) -> bool:
    """A glob matches the path relative to the source (`*` crosses `/`) or the entry's own name."""
    name = relative.rsplit("/", 1)[-1]
    return any(fnmatch.fnmatchcase(relative, p) or fnmatch.fnmatchcase(name, p) for p in patterns)


def check_config(config: ConfigBackupConfig) -> ConfigBackupConfig:
    """Refuse before writing anything: every path must resolve under the roots of this process's settings, every
    source must exist and backup_dir must not lie inside one. Returns the config with the resolved paths, so the
    backup reads and writes exactly what was checked."""
    try:
        resolved_sources, backup_dir = resolved_backup_paths(config)
    except ConfigRefused as exc:
        raise BackupRefused(str(exc)) from None
    for source, resolved in zip(config.sources, resolved_sources, strict=True):
        if not resolved.exists():
            raise BackupRefused(f"source {source.name!r}: {source.path} does not exist")
        if backup_dir == resolved or resolved in backup_dir.parents:
            raise BackupRefused(f"backup_dir {config.backup_dir} is inside source {source.name!r} ({source.path})")
    return ConfigBackupConfig(
        sources=[
            BackupSource(path=str(resolved), name=source.name, excludes=list(source.excludes))
            for source, resolved in zip(config.sources, resolved_sources, strict=True)
        ],
        backup_dir=str(backup_dir),
        compress=config.compress,
        retention_days=config.retention_days,
        include_hard_links=config.include_hard_links,
    )


def _add_entry(tar: tarfile.TarFile, path: Path, arcname: str, include_hard_links: bool) -> bool | None:
    """Add one entry (never following a symlink); a regular file is read from the descriptor that was checked, so it
    cannot be swapped in between. False when a hard-linked file is skipped, None for a non-file entry, True when a
    file was archived; FileNotFoundError when it vanished."""
    status = os.lstat(path)
    if not stat.S_ISREG(status.st_mode):
        tar.add(path, arcname=arcname, recursive=False)  # a folder, symlink (as a link) or special file: no content
        return None
    fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    with os.fdopen(fd, "rb") as handle:
        opened = os.fstat(handle.fileno())
        if not stat.S_ISREG(opened.st_mode) or (opened.st_dev, opened.st_ino) != (status.st_dev, status.st_ino):
            raise FileNotFoundError(f"{path} changed while it was read")
        if opened.st_nlink > 1 and not include_hard_links:
            return False
        info = tar.gettarinfo(arcname=arcname, fileobj=handle)
        tar.addfile(info, handle)
    return True


def _write_archive(
    source: BackupSource,
    target: Path,
    config: ConfigBackupConfig,
    result: SourceResult,
    on_file: Callable[[Path], None] | None,
) -> None:
    root = Path(source.path)
    mode = "w:gz" if config.compress else "w"
    if not root.is_dir():  # a single file is archived as itself
        with tarfile.open(target, mode) as tar:
            added = _add_entry(tar, root, f"{source.name}/{root.name}", config.include_hard_links)
        if added is False:
            result.hard_links_skipped.append(root.name)
        result.files = 1 if added else 0
        return
    with tarfile.open(target, mode) as tar:
        tar.add(root, arcname=source.name, recursive=False)
        for directory, dirnames, filenames in os.walk(root, onerror=_raise):
            base = Path(directory)
            rel_dir = base.relative_to(root).as_posix()
            dirnames[:] = sorted(d for d in dirnames if not is_excluded(_join(rel_dir, d), source.excludes))
            for entry in [*dirnames, *sorted(filenames)]:
                relative = _join(rel_dir, entry)
                if entry in filenames and is_excluded(relative, source.excludes):
                    continue
                path = base / entry
                if on_file is not None:
                    on_file(path)
                try:
                    added = _add_entry(tar, path, f"{source.name}/{relative}", config.include_hard_links)
                except FileNotFoundError:
                    # Files come and go in live config dirs; a vanished file is skipped and counted, not fatal.
                    result.files_vanished += 1
                    continue
                if added is False:
                    result.hard_links_skipped.append(relative)
                elif added:
                    result.files += 1
        if not root.is_dir():
            raise FileNotFoundError(f"source {source.path} disappeared during the backup")


def _join(rel_dir: str, name: str) -> str:
    return name if rel_dir == "." else f"{rel_dir}/{name}"


def _raise(error: OSError) -> None:
    raise error


def backup_source(
    source: BackupSource,
    config: ConfigBackupConfig,
    task_name: str,
    now: dt.datetime,
    on_file: Callable[[Path], None] | None = None,
) -> SourceResult:
    """Archive one source to a temp file in backup_dir and rename it into place only when complete."""
    result = SourceResult(source.name)
    backup_dir = Path(config.backup_dir)
    final = backup_dir / archive_name(task_name, source.name, now, config.compress)
    fd, temp_name = tempfile.mkstemp(prefix=f".{final.name}.", suffix=".partial", dir=backup_dir)
    os.close(fd)
    temp = Path(temp_name)
    try:
        _write_archive(source, temp, config, result, on_file)
        os.replace(temp, final)
    except OSError as exc:
        temp.unlink(missing_ok=True)
        result.error = f"{type(exc).__name__}: {exc}"
        result.files = 0
        return result
    result.archive = str(final)
    result.size_bytes = final.stat().st_size
    return result


def expired_archives(backup_dir: Path, task_name: str, source: str, now: dt.datetime, retention_days: int) -> list[Path]:
    """This task's archives of `source` older than `retention_days` (by the timestamp in their name)."""
    pattern = re.compile(rf"{re.escape(task_name)}__{re.escape(source)}__(\d{{8}}T\d{{6}}Z)\.tar(\.gz)?")
    cutoff = now.astimezone(dt.UTC) - dt.timedelta(days=retention_days)
    expired = []
    for entry in backup_dir.iterdir():
        match = pattern.fullmatch(entry.name)
        if match and entry.is_file():
            stamp = dt.datetime.strptime(match.group(1), _STAMP_FORMAT).replace(tzinfo=dt.UTC)
            if stamp < cutoff:
                expired.append(entry)
    return sorted(expired)


def run_backup(
    config: ConfigBackupConfig,
    task_name: str,
    now: dt.datetime,
    log: logging.Logger | logging.LoggerAdapter,
    on_file: Callable[[Path], None] | None = None,
) -> BackupResult:
    """Back up every source; retention runs only for sources whose new archive was written."""
    config = check_config(config)
    too_long = archive_name_problem(task_name, config)
    if too_long is not None:
        raise BackupRefused(f"sources.{too_long[0]}.name: {too_long[1]}")
    backup_dir = Path(config.backup_dir)
    backup_dir.mkdir(parents=True, exist_ok=True)
    result = BackupResult()
    for source in config.sources:
        outcome = backup_source(source, config, task_name, now, on_file)
        result.sources.append(outcome)
        if outcome.error:
            log.error(f"backup of {source.name} failed: {outcome.error}")
            continue
        log.info(f"{source.name}: {outcome.files} files, {outcome.size_bytes} bytes -> {outcome.archive}")
        for old in expired_archives(backup_dir, task_name, source.name, now, config.retention_days):
            old.unlink(missing_ok=True)
            result.deleted.append(old.name)
    return result
