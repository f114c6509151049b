"""RACING_EXPORT_RETENTION_DAYS: only the export's own day files older than the cutoff go, on real files."""

from __future__ import annotations

import datetime as dt
import os
from pathlib import Path

import pytest

from racing_orchestration.export.retention import export_cutoff, export_day_of, expired_export_files, prune_exports

pytestmark = pytest.mark.unit
TODAY = dt.date(2026, 3, 31)


def _touch(root: Path, relative: str) -> Path:
    path = root / relative
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(b"PAR1")
    return path


@pytest.mark.parametrize(("keep", "first_kept"), [(1, dt.date(2026, 3, 30)), (30, dt.date(2026, 3, 1)),
                                                  (365, dt.date(2025, 3, 31))])
def test_cutoff(keep: int, first_kept: dt.date) -> None:
    assert export_cutoff(keep, TODAY) == first_kept


@pytest.mark.parametrize("keep", [0, -3])
def test_cutoff_refuses_less_than_a_day(keep: int) -> None:
    with pytest.raises(ValueError, match="RACING_EXPORT_RETENTION_DAYS must be at least 1"):
        export_cutoff(keep, TODAY)


@pytest.mark.parametrize(
    ("relative", "day"),
    [
        ("meetings/meetings_2026-03-01.parquet", dt.date(2026, 3, 1)),
        ("odds_snapshots/odds_snapshots_2026-03-01.parquet", dt.date(2026, 3, 1)),
        ("meetings/races_2026-03-01.parquet", None),  # another table's name in this folder
        ("other/other_2026-03-01.parquet", None),  # not a table of the export
        ("meetings/meetings_2026-02-30.parquet", None),  # no such day
        ("meetings/meetings_2026-03-01.parquet.bak", None),
        ("meetings/.meetings_2026-03-01.parquet.123.tmp", None),  # a write in progress
        ("meetings/meetings_20260301.parquet", None),
    ],
)
def test_export_day_of(relative: str, day: dt.date | None) -> None:
    assert export_day_of(Path("/x") / relative, ("meetings", "odds_snapshots")) == day


def test_deletes_only_older_day_files_of_its_own_naming(tmp_path: Path) -> None:
    from racing_orchestration.export.retention import export_table_names

    table = export_table_names()[0]
    other_table = export_table_names()[1]
    doomed = [_touch(tmp_path, f"{table}/{table}_2026-02-28.parquet"),  # the day before the cutoff (30 days)
              _touch(tmp_path, f"{other_table}/{other_table}_2025-01-01.parquet")]
    kept = [
        _touch(tmp_path, f"{table}/{table}_2026-03-01.parquet"),  # the cutoff day itself
        _touch(tmp_path, f"{table}/{table}_2026-03-31.parquet"),
        _touch(tmp_path, f"{table}/{other_table}_2025-01-01.parquet"),
        _touch(tmp_path, f"{table}/notes_2025-01-01.parquet"),
        _touch(tmp_path, f"{table}/README.txt"),
        _touch(tmp_path, f"{table}/{table}_2025-02-30.parquet"),
        _touch(tmp_path, "analyst/analyst_2025-01-01.parquet"),
        _touch(tmp_path, f"{table}_2025-01-01.parquet"),  # at the root, not in its table's folder
        _touch(tmp_path, f"{table}/{table}_2026-01-15.parquet"),  # spared: this run just wrote it
    ]
    target = _touch(tmp_path / "elsewhere", "precious.parquet")
    link = tmp_path / table / f"{table}_2025-06-01.parquet"
    os.symlink(target, link)
    kept.append(link)

    assert sorted(expired_export_files(tmp_path, 30, TODAY, spare=[dt.date(2026, 1, 15)])) == sorted(doomed)
    deleted = prune_exports(tmp_path, 30, TODAY, spare=[dt.date(2026, 1, 15)])

    assert sorted(deleted) == sorted(doomed)
    assert [p for p in doomed if p.exists()] == []
    assert [p for p in kept if not p.is_symlink() and not p.exists()] == []
    assert link.is_symlink() and target.exists()
    assert prune_exports(tmp_path, 30, TODAY) == [tmp_path / table / f"{table}_2026-01-15.parquet"]


def test_a_missing_folder_is_nothing_to_prune(tmp_path: Path) -> None:
    assert prune_exports(tmp_path / "never-written", 7, TODAY) == []
