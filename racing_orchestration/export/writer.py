"""Write one racing day's export: a Parquet file per table at `<root>/<table>/<table>_<YYYY-MM-DD>.parquet`.

Re-exporting is idempotent and atomic: each file is written to a hidden temporary file in the same folder, flushed
to disk, then renamed over the old one, so a reader sees the old file or the new one, never half of one (pyarrow and
pandas skip names starting with "." when reading a folder). A file whose bytes would not change is left alone, so
its modification time says when the day's data last changed. Every day gets every table's file, empty ones too, so
a month's files always read with the same columns.
"""

from __future__ import annotations

import datetime as dt
import io
import os
import time
from dataclasses import dataclass
from pathlib import Path

import pyarrow.parquet as pq
import sqlalchemy as sa

from racing_orchestration.export.tables import EXPORT_TABLES, ExportTable

COMPRESSION = "zstd"


def export_path(root: Path, table: str, day: dt.date) -> Path:
    """The stable file name of one table's day."""
    return root / table / f"{table}_{day.isoformat()}.parquet"


@dataclass(frozen=True)
class TableExport:
    table: str
    rows: int
    path: Path
    written: bool  # False: the file already held exactly these bytes


@dataclass(frozen=True)
class DayExport:
    day: dt.date
    tables: tuple[TableExport, ...]
    seconds: float

    @property
    def rows(self) -> dict[str, int]:
        return {t.table: t.rows for t in self.tables}

    @property
    def files_written(self) -> int:
        return sum(t.written for t in self.tables)


def parquet_bytes(table: ExportTable, rows: list[sa.RowMapping]) -> bytes:
    buffer = io.BytesIO()
    pq.write_table(table.to_arrow(rows), buffer, compression=COMPRESSION)
    return buffer.getvalue()


def write_atomically(path: Path, data: bytes) -> bool:
    """Replace `path` with `data` unless it already holds exactly that; True when written."""
    try:
        if path.read_bytes() == data:
            return False
    except FileNotFoundError:
        pass
    path.parent.mkdir(parents=True, exist_ok=True)
    temporary = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    try:
        with open(temporary, "wb") as handle:
            handle.write(data)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(temporary, path)
    finally:
        temporary.unlink(missing_ok=True)
    return True


def export_day(conn: sa.Connection, day: dt.date, root: Path) -> DayExport:
    """Read the day's rows of every export table from the race database and write their files."""
    started = time.perf_counter()
    exports = []
    for table in EXPORT_TABLES:
        rows = list(conn.execute(table.query(day)).mappings())
        path = export_path(root, table.name, day)
        exports.append(TableExport(table.name, len(rows), path, write_atomically(path, parquet_bytes(table, rows))))
    return DayExport(day, tuple(exports), time.perf_counter() - started)
