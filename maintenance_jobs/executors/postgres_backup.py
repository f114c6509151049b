"""postgres_backup_executor: `pg_dump -Fc` of the deployment's databases, a sha256 beside each dump, retention.

Dumps are named `<task>__<database>__<YYYYMMDDTHHMMSSZ>.dump` with `<dump>.sha256` beside them (the `sha256sum`
format, so `sha256sum -c` checks one). Retention only ever deletes files of that naming carrying this task's name and
one of the three database names, so other files in the folder (and other tasks' dumps) stay.

Credentials: each database's URL comes from the deployment's settings (DAGSTER_POSTGRES_URL, RACING_DATABASE_URL,
MAINTENANCE_DATABASE_URL), never from the task's config. pg_dump gets the connection through PG* variables in an
environment of its own (nothing else of this process's environment), the password through a passfile (mode 0600, in
a private temporary folder, removed afterwards): never on its command line, in a log line, a tag or a file name.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import logging
import os
import re
import shutil
import subprocess
import tempfile
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

from sqlalchemy.engine import make_url

from maintenance_jobs import settings as maintenance_settings
from maintenance_jobs.executor_configs import (
    POSTGRES_DATABASES,
    ConfigRefused,
    PostgresBackupConfig,
    resolved_postgres_backup_dir,
)
from maintenance_jobs.executors.scrub import scrub
from orchestration_core.settings import platform_settings, secret

_STAMP_FORMAT = "%Y%m%dT%H%M%SZ"
DUMP_SUFFIX = ".dump"
CHECKSUM_SUFFIX = ".sha256"
# The search path pg_dump and pg_restore run with when MAINTENANCE_PG_BIN_DIR is unset (the image's Debian paths).
DEFAULT_TOOL_PATH = "/usr/local/bin:/usr/bin:/bin"
# Each database's setting, by the short name task configs use.
DATABASE_SETTINGS = {
    "dagster": "DAGSTER_POSTGRES_URL",
    "racing": "RACING_DATABASE_URL",
    "maintenance": "MAINTENANCE_DATABASE_URL",
}


class PostgresBackupRefused(ConfigRefused):
    """The backup cannot run: a refused config, a database whose URL is not set, no pg_dump."""


@dataclass
class DumpResult:
    database: str
    dump: str | None = None
    sha256: str | None = None
    size_bytes: int = 0
    finished_at: dt.datetime | None = None
    error: str | None = None


@dataclass
class PostgresBackupResult:
    dumps: list[DumpResult] = field(default_factory=list)
    deleted: list[str] = field(default_factory=list)

    @property
    def failed(self) -> list[DumpResult]:
        return [d for d in self.dumps if d.error]

    @property
    def message(self) -> str:
        ok = [d for d in self.dumps if not d.error]
        text = f"dumped {len(ok)}/{len(self.dumps)} databases, {sum(d.size_bytes for d in ok)} bytes"
        if self.deleted:
            text += f"; deleted {len(self.deleted)} expired files"
        if self.failed:
            text += "; failed: " + "; ".join(f"{d.database}: {d.error}" for d in self.failed)
        return text


def dump_name(task_name: str, database: str, at: dt.datetime) -> str:
    return f"{task_name}__{database}__{at.astimezone(dt.UTC).strftime(_STAMP_FORMAT)}{DUMP_SUFFIX}"


def database_urls() -> dict[str, str | None]:
    """Each database's URL from this process's settings (None when its variable is unset)."""
    current = platform_settings()
    return {
        "dagster": secret(current.dagster_postgres_url),
        "racing": secret(current.racing_database_url),
        "maintenance": secret(current.maintenance_database_url),
    }


def connection_environment(url: str, passfile: Path | None, path: str) -> dict[str, str]:
    """The whole environment of a pg_dump/pg_restore call for `url`: PG* connection variables and PATH, nothing
    else (so no other secret of this process reaches it). The password is not among them: it is in `passfile`."""
    parsed = make_url(url)
    host = parsed.host or parsed.query.get("host")  # the socket folder of `?host=/path` URLs
    env = {"PATH": path, "PGDATABASE": parsed.database or "", "PGCONNECT_TIMEOUT": "30"}
    if isinstance(host, tuple):
        host = host[0]
    if host:
        env["PGHOST"] = str(host)
    if parsed.port:
        env["PGPORT"] = str(parsed.port)
    if parsed.username:
        env["PGUSER"] = parsed.username
    if passfile is not None:
        env["PGPASSFILE"] = str(passfile)
    sslmode = parsed.query.get("sslmode")
    if isinstance(sslmode, str):
        env["PGSSLMODE"] = sslmode
    return env


def passfile_line(password: str) -> str:
    """A `.pgpass` line matching any host, port, database and user (the file serves one call only); `:` and `\\`
    escaped as libpq reads them."""
    escaped = password.replace("\\", "\\\\").replace(":", "\\:")
    return f"*:*:*:*:{escaped}\n"


@contextmanager
def password_file(url: str) -> Iterator[Path | None]:
    """A passfile (0600, in a private temporary folder) holding the URL's password, removed on exit; None without
    a password."""
    password = make_url(url).password
    if not password:
        yield None
        return
    folder = Path(tempfile.mkdtemp(prefix="pgpass-"))  # mode 0700
    try:
        path = folder / "pgpass"
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(fd, "w") as handle:
            handle.write(passfile_line(str(password)))
        yield path
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def tool_search_path() -> str:
    """Where pg_dump and pg_restore are looked for: MAINTENANCE_PG_BIN_DIR when set, else the image's system paths."""
    folder = maintenance_settings.pg_bin_dir()
    return str(folder) if folder is not None else DEFAULT_TOOL_PATH


def find_tool(name: str) -> str:
    path = shutil.which(name, path=tool_search_path())
    if path is None:
        raise PostgresBackupRefused(f"{name} not found on {tool_search_path()} (install the PostgreSQL client "
                                    "or set MAINTENANCE_PG_BIN_DIR)")
    return path


def sha256_of(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        while chunk := handle.read(1024 * 1024):
            digest.update(chunk)
    return digest.hexdigest()


def _write_atomically(path: Path, text: str) -> None:
    fd, temp = tempfile.mkstemp(prefix=".pgdump-", suffix=".partial", dir=path.parent)
    try:
        with os.fdopen(fd, "w") as handle:
            handle.write(text)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(temp, path)
    except BaseException:
        Path(temp).unlink(missing_ok=True)
        raise


def _stderr_line(stderr: bytes, secrets: list[str]) -> str:
    lines = [line for line in stderr.decode(errors="replace").splitlines() if line.strip()]
    return scrub(lines[-1] if lines else "no output", secrets)[:300]


def dump_database(database: str, url: str, backup_dir: Path, task_name: str, now: dt.datetime,
                  timeout_seconds: float) -> DumpResult:
    """Dump one database to a temporary file in backup_dir; only a complete dump (pg_dump exit 0) is renamed to its
    final name, after its checksum file is in place. A failure leaves neither."""
    result = DumpResult(database)
    final = backup_dir / dump_name(task_name, database, now)
    password = make_url(url).password
    secrets = [str(password)] if password else []
    fd, temp_name = tempfile.mkstemp(prefix=".pgdump-", suffix=".partial", dir=backup_dir)
    os.close(fd)
    temp = Path(temp_name)
    checksum = final.with_name(final.name + CHECKSUM_SUFFIX)
    renamed = False
    try:
        pg_dump = find_tool("pg_dump")
        with password_file(url) as passfile:
            env = connection_environment(url, passfile, tool_search_path())
            completed = subprocess.run(
                [pg_dump, "--format=custom", "--no-password", f"--file={temp}"],
                env=env, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                timeout=timeout_seconds, check=False,
            )
        if completed.returncode != 0:
            raise RuntimeError(f"pg_dump exited {completed.returncode}: {_stderr_line(completed.stderr, secrets)}")
        with open(temp, "rb+") as handle:
            os.fsync(handle.fileno())
        digest = sha256_of(temp)
        _write_atomically(checksum, f"{digest}  {final.name}\n")
        os.replace(temp, final)
        renamed = True
    except subprocess.TimeoutExpired:
        result.error = f"pg_dump did not finish within {timeout_seconds:g} s"
    except Exception as exc:  # whatever failed, the run reports it per database and the other databases still run
        text = str(exc) if isinstance(exc, RuntimeError | PostgresBackupRefused) else f"{type(exc).__name__}: {exc}"
        result.error = scrub(text, secrets)
    finally:
        if not renamed:  # never a half dump, nor a checksum without its dump
            temp.unlink(missing_ok=True)
            checksum.unlink(missing_ok=True)
    if result.error:
        return result
    result.dump = str(final)
    result.sha256 = digest
    result.size_bytes = final.stat().st_size
    result.finished_at = dt.datetime.now(dt.UTC)
    return result


_DUMP_PATTERN = re.compile(rf"(?P<task>.+)__(?P<db>{'|'.join(POSTGRES_DATABASES)})__(?P<stamp>\d{{8}}T\d{{6}}Z)"
                           rf"{re.escape(DUMP_SUFFIX)}(?P<checksum>{re.escape(CHECKSUM_SUFFIX)})?")


def expired_files(backup_dir: Path, task_name: str, now: dt.datetime, keep_days: int) -> list[Path]:
    """This task's dumps (and their checksum files) older than `keep_days`, by the timestamp in their name."""
    cutoff = now.astimezone(dt.UTC) - dt.timedelta(days=keep_days)
    expired = []
    for entry in backup_dir.iterdir():
        match = _DUMP_PATTERN.fullmatch(entry.name)
        if match is None or match.group("task") != task_name or not entry.is_file() or entry.is_symlink():
            continue
        stamp = dt.datetime.strptime(match.group("stamp"), _STAMP_FORMAT).replace(tzinfo=dt.UTC)
        if stamp < cutoff:
            expired.append(entry)
    return sorted(expired)


def run_postgres_backup(config: PostgresBackupConfig, task_name: str, now: dt.datetime,
                        log: logging.Logger | logging.LoggerAdapter,
                        urls: Mapping[str, str | None] | None = None) -> PostgresBackupResult:
    """Dump every configured database; retention runs only when every dump of this run was written, so a failing
    backup never deletes the last good ones."""
    # Validated again under this process's settings (the run worker's roots), like every executor config.
    config = PostgresBackupConfig.model_validate(
        {name: getattr(config, name) for name in PostgresBackupConfig.model_fields})
    backup_dir = resolved_postgres_backup_dir(config)
    urls = database_urls() if urls is None else urls
    missing = [d for d in config.databases if not urls.get(d)]
    if missing:
        raise PostgresBackupRefused("no URL for " + ", ".join(f"{d} (set {DATABASE_SETTINGS[d]})" for d in missing))
    find_tool("pg_dump")
    backup_dir.mkdir(parents=True, exist_ok=True)
    result = PostgresBackupResult()
    for database in config.databases:
        outcome = dump_database(database, str(urls[database]), backup_dir, task_name, now, config.timeout_seconds)
        result.dumps.append(outcome)
        if outcome.error:
            log.error(f"dump of {database} failed: {outcome.error}")
        else:
            log.info(f"{database}: {outcome.size_bytes} bytes -> {outcome.dump} (sha256 {outcome.sha256})")
    if not result.failed:
        for old in expired_files(backup_dir, task_name, now, config.keep_days):
            old.unlink(missing_ok=True)
            result.deleted.append(old.name)
    return result


# --- Restore: the tested way back (README "Backup and restore") ----------------------------------------------------


class RestoreRefused(ValueError):
    """The dump cannot be restored: no checksum, a checksum that does not match, pg_restore failed."""


def verify_checksum(dump: Path) -> str:
    """The dump's sha256 when its `.sha256` file agrees; RestoreRefused otherwise."""
    checksum = dump.with_name(dump.name + CHECKSUM_SUFFIX)
    if not checksum.is_file():
        raise RestoreRefused(f"{checksum} is missing: not a complete backup")
    fields = checksum.read_text().split()
    expected = fields[0] if fields else ""
    actual = sha256_of(dump)
    if actual != expected:
        raise RestoreRefused(f"{dump.name}: sha256 {actual} does not match {checksum.name} ({expected})")
    return actual


def database_of(dump: Path) -> str | None:
    """The database a dump of this executor's naming holds (None for any other file name)."""
    match = _DUMP_PATTERN.fullmatch(dump.name)
    return match.group("db") if match is not None and match.group("checksum") is None else None


def restore_dump(dump: Path, target_url: str, *, clean: bool = False, timeout_seconds: float = 3600) -> None:
    """Check the dump's checksum, then `pg_restore --exit-on-error --no-owner --no-privileges` it into the database
    at `target_url` (an empty one, or with `clean` its objects dropped first); the credentials travel as for
    pg_dump."""
    verify_checksum(dump)
    pg_restore = find_tool("pg_restore")
    password = make_url(target_url).password
    with password_file(target_url) as passfile:
        env = connection_environment(target_url, passfile, tool_search_path())
        completed = subprocess.run(
            [pg_restore, "--exit-on-error", "--no-owner", "--no-privileges", "--no-password",
             *(["--clean", "--if-exists"] if clean else []), f"--dbname={env['PGDATABASE']}", str(dump)],
            env=env, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
            timeout=timeout_seconds, check=False,
        )
    if completed.returncode != 0:
        secrets = [str(password)] if password else []
        raise RestoreRefused(f"pg_restore exited {completed.returncode}: {_stderr_line(completed.stderr, secrets)}")
