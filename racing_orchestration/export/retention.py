"""Retention of the export folder: day files older than RACING_EXPORT_RETENTION_DAYS are deleted (unset: kept forever).

Only the export's own files go: `<root>/<table>/<table>_<YYYY-MM-DD>.parquet` for the export's tables, a regular file
(not a link) whose day is before the cutoff. Anything else in the folder (an analyst's notes, another tool's files, a
table this version does not write, a name that does not parse) is left alone. Growth when kept forever: README
"Storage: what grows".
"""

from __future__ import annotations

import datetime as dt
import re
from collections.abc import Iterable
from pathlib import Path

_DAY_FILE = re.compile(r"(?P<table>[a-z0-9_]+)_(?P<day>\d{4}-\d{2}-\d{2})\.parquet")


def export_cutoff(keep_days: int, today: dt.date) -> dt.date:
    """The first day kept: today and the `keep_days` days before it stay."""
    if keep_days < 1:
        raise ValueError(f"RACING_EXPORT_RETENTION_DAYS must be at least 1, got {keep_days}")
    return today - dt.timedelta(days=keep_days)


def export_table_names() -> tuple[str, ...]:
    # Imported here: the tables module loads pyarrow, which the definitions' import avoids (BENCHMARKS.md "Process
    # start-up"); only an export run prunes.
    from racing_orchestration.export.tables import EXPORT_TABLES

    return tuple(table.name for table in EXPORT_TABLES)


def export_day_of(path: Path, tables: Iterable[str]) -> dt.date | None:
    """The day of one of the export's own files (`<table>/<table>_<day>.parquet`, table among `tables`), else None."""
    match = _DAY_FILE.fullmatch(path.name)
    if not match or match["table"] != path.parent.name or match["table"] not in tuple(tables):
        return None
    try:
        return dt.date.fromisoformat(match["day"])
    except ValueError:
        return None


def expired_export_files(root: Path, keep_days: int, today: dt.date, *, spare: Iterable[dt.date] = ()) -> list[Path]:
    """The export's day files older than the cutoff, but for the days in `spare` (those a run has just written)."""
    cutoff = export_cutoff(keep_days, today)
    spared = set(spare)
    tables = export_table_names()
    expired = []
    for table in tables:
        folder = root / table
        if not folder.is_dir() or folder.is_symlink():
            continue
        for path in sorted(folder.iterdir()):
            day = export_day_of(path, tables)
            if day is not None and day < cutoff and day not in spared and path.is_file() and not path.is_symlink():
                expired.append(path)
    return expired


def prune_exports(root: Path, keep_days: int, today: dt.date, *, spare: Iterable[dt.date] = ()) -> list[Path]:
    """Delete the expired day files; return them."""
    expired = expired_export_files(root, keep_days, today, spare=spare)
    for path in expired:
        path.unlink(missing_ok=True)  # another run may have deleted it first
    return expired
