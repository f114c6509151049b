"""The daily Parquet export: its documented schema, atomic idempotent writes, and the files of a simulated racing day
read back with pandas against the race database, row for row (real Postgres, a real Dagster instance)."""

import datetime as dt
import json
import re

import dagster as dg
import pandas as pd
import pytest
import sqlalchemy as sa

from racing_orchestration.export.asset import race_day_export
from racing_orchestration.export.resource import RaceExportFolder
from racing_orchestration.export.tables import EXPORT_TABLES, schema_markdown
from racing_orchestration.export.writer import export_path, write_atomically
from racing_orchestration.race_db.store import store_dividends, store_odds_snapshot, store_results, upsert_event
from racing_orchestration.tab.sim_engine import SimFeed, SimFeedConfig
from tests.conftest import REPO_ROOT
from tests.racing_orchestration.checkpoint_support import Clock, fetch_event, seed_day

DAY = dt.date(2026, 11, 29)
DOC = REPO_ROOT / "docs" / "race-data-export.md"

# The race database's rows of one day, written independently of the export's own queries.
DAY_ROWS = {
    "meetings": "SELECT * FROM meetings WHERE meeting_date = :d ORDER BY meeting_id",
    "races": "SELECT m.meeting_date, r.* FROM races r JOIN meetings m USING (meeting_id) WHERE m.meeting_date = :d "
             "ORDER BY r.race_id",
    "runners": "SELECT m.meeting_date, x.* FROM runners x JOIN races r USING (race_id) JOIN meetings m USING "
               "(meeting_id) WHERE m.meeting_date = :d ORDER BY x.race_id, x.runner_number",
    "odds": "SELECT m.meeting_date, x.* FROM odds_snapshots x JOIN races r USING (race_id) JOIN meetings m USING "
            "(meeting_id) WHERE m.meeting_date = :d AND x.checkpoint IN ('t60', 't15') "
            "ORDER BY x.race_id, x.runner_number, x.checkpoint",
    "results": "SELECT m.meeting_date, x.* FROM results x JOIN races r USING (race_id) JOIN meetings m USING "
               "(meeting_id) WHERE m.meeting_date = :d ORDER BY x.race_id, x.runner_number",
    "dividends": "SELECT m.meeting_date, x.* FROM dividends x JOIN races r USING (race_id) JOIN meetings m USING "
                 "(meeting_id) WHERE m.meeting_date = :d ORDER BY x.race_id, x.dividend_id",
}


def _plain(value):
    """A cell from pandas or from the database, as one comparable Python value."""
    if isinstance(value, list | tuple) or hasattr(value, "tolist"):
        items = value.tolist() if hasattr(value, "tolist") else value
        return [_plain(v) for v in items]
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    if value is None or (not isinstance(value, str) and pd.isna(value)):
        return None
    if isinstance(value, dt.datetime):
        return pd.Timestamp(value).tz_convert("UTC")
    return value.item() if hasattr(value, "item") else value


def _database_rows(race_db, table: str, day: dt.date) -> list[dict]:
    columns = [c.name for c in next(t for t in EXPORT_TABLES if t.name == table).columns]
    with race_db.connect() as conn:
        rows = [dict(r) for r in conn.execute(sa.text(DAY_ROWS[table]), {"d": day}).mappings()]
    for row in rows:
        if "positions" in row:  # stored as [[runner_number, position], ...]
            row["positions"] = [{"runner_number": n, "position": p} for n, p in row["positions"]]
    return [{c: _plain(row[c]) for c in columns} for row in rows]


def _file_rows(root, table: str, day: dt.date) -> list[dict]:
    frame = pd.read_parquet(export_path(root, table, day))
    return [{c: _plain(v) for c, v in row.items()} for row in frame.to_dict("records")]


def _simulate_racing_day(race_db, countries=("NZ",), day: dt.date = DAY) -> int:
    """The day's card, each race's T-60 and T-15 snapshots and its Final results and dividends, as the runs store
    them, from the simulated feed at the right simulated times."""
    clock = Clock(dt.datetime.combine(day, dt.time(), dt.UTC) - dt.timedelta(hours=7))
    feed = SimFeed(SimFeedConfig(seed=7), now=clock)
    seed_day(feed, race_db, day, countries=countries)
    races = [r for m in feed.day(day) if m.country in countries for r in m.races]
    for race in races:
        for checkpoint, before in (("t60", 60), ("t15", 15)):
            clock.now = race.scheduled_start - dt.timedelta(minutes=before)
            event = fetch_event(feed, race.race_id)
            with race_db.begin() as conn:
                upsert_event(conn, event)
                if not event.is_abandoned:
                    store_odds_snapshot(conn, race.race_id, checkpoint, event.runners, clock.now, "run-" + checkpoint)
        clock.now = race.jump() + dt.timedelta(minutes=15)
        event = fetch_event(feed, race.race_id)
        with race_db.begin() as conn:
            upsert_event(conn, event)
            store_results(conn, race.race_id, event.results, provisional=not event.is_final)
            store_dividends(conn, race.race_id, event.dividends)
    return len(races)


def _seed_card(race_db, day: dt.date) -> None:
    """The day's NZ card alone (meetings, races, runners), as the morning scrape stores it."""
    clock = Clock(dt.datetime.combine(day, dt.time(), dt.UTC) - dt.timedelta(hours=7))
    seed_day(SimFeed(SimFeedConfig(seed=7), now=clock), race_db, day, countries=("NZ",))


def _export(instance, race_db, root, partition: str) -> dg.ExecuteInProcessResult:
    return dg.materialize([race_day_export], partition_key=partition, instance=instance,
                          resources={"race_db": race_db, "race_export": RaceExportFolder(path=str(root))})


@pytest.mark.unit
def test_the_documented_schema_is_the_exported_one() -> None:
    text = DOC.read_text()
    block = text[text.index("<!-- schema:start"):].split("\n", 1)[1].split("<!-- schema:end -->")[0]
    assert block == schema_markdown(), "stale: python -m racing_orchestration.export.tables regenerates it"


@pytest.mark.unit
def test_a_rewrite_is_atomic_and_skipped_when_nothing_changed(tmp_path) -> None:
    path = tmp_path / "races" / "races_2026-11-29.parquet"
    assert write_atomically(path, b"first") is True
    stamp = path.stat().st_mtime_ns
    assert write_atomically(path, b"first") is False and path.stat().st_mtime_ns == stamp
    assert write_atomically(path, b"second") is True and path.read_bytes() == b"second"
    assert [p.name for p in path.parent.iterdir()] == [path.name]  # no temporary file left behind


@pytest.mark.integration
def test_a_racing_day_exports_the_database_row_for_row(pg_instance, race_db, tmp_path) -> None:
    races = _simulate_racing_day(race_db)
    result = _export(pg_instance, race_db, tmp_path, DAY.isoformat())
    assert result.success
    for table in EXPORT_TABLES:
        path = export_path(tmp_path, table.name, DAY)
        assert path == tmp_path / table.name / f"{table.name}_{DAY}.parquet"  # stable names
        expected = _database_rows(race_db, table.name, DAY)
        assert expected, f"{table.name}: the simulated day should fill every table"
        assert _file_rows(tmp_path, table.name, DAY) == expected, table.name
        frame = pd.read_parquet(path)
        assert list(frame.columns) == [c.name for c in table.columns]
        assert not frame.duplicated(list(table.key)).any(), f"{table.name}: key {table.key} is not unique"
    races_frame = pd.read_parquet(export_path(tmp_path, "races", DAY))
    assert len(races_frame) == races and str(races_frame["start_time"].dt.tz) == "UTC"
    assert set(pd.read_parquet(export_path(tmp_path, "odds", DAY))["checkpoint"]) == {"t60", "t15"}
    [record] = pg_instance.fetch_materializations(dg.AssetKey("race_day_export"), limit=5).records
    meta = {k: v.value for k, v in record.asset_materialization.metadata.items()}
    assert record.asset_materialization.partition == DAY.isoformat() and meta["races_rows"] == races
    # One file per table, six in all (docs/race-data-export.md).
    assert sorted(str(p.relative_to(tmp_path)) for p in tmp_path.rglob("*")) == [
        "dividends", "dividends/dividends_2026-11-29.parquet", "meetings", "meetings/meetings_2026-11-29.parquet",
        "odds", "odds/odds_2026-11-29.parquet", "races", "races/races_2026-11-29.parquet",
        "results", "results/results_2026-11-29.parquet", "runners", "runners/runners_2026-11-29.parquet"]
    assert meta["files_written"] == 6


@pytest.mark.integration
def test_re_export_rewrites_only_what_changed(pg_instance, race_db, tmp_path) -> None:
    _simulate_racing_day(race_db)
    _export(pg_instance, race_db, tmp_path, DAY.isoformat())
    stamps = {t.name: export_path(tmp_path, t.name, DAY).stat().st_mtime_ns for t in EXPORT_TABLES}
    again = _export(pg_instance, race_db, tmp_path, DAY.isoformat())
    meta = again.asset_materializations_for_node("race_day_export")[0].metadata
    assert meta["files_written"].value == 0 and meta["files_unchanged"].value == 6
    with race_db.begin() as conn:
        conn.execute(sa.text("UPDATE races SET weather = 'Hail' WHERE race_id = (SELECT min(race_id) FROM races)"))
    changed = _export(pg_instance, race_db, tmp_path, DAY.isoformat())
    assert changed.asset_materializations_for_node("race_day_export")[0].metadata["files_written"].value == 1
    after = {t.name: export_path(tmp_path, t.name, DAY).stat().st_mtime_ns for t in EXPORT_TABLES}
    assert [name for name in stamps if stamps[name] != after[name]] == ["races"]
    assert "Hail" in set(pd.read_parquet(export_path(tmp_path, "races", DAY))["weather"])


@pytest.mark.integration
def test_the_readme_one_liner_loads_a_month(pg_instance, race_db, tmp_path, monkeypatch) -> None:
    days = [dt.date(2026, 10, 31), dt.date(2026, 11, 1), dt.date(2026, 11, 2)]
    for day in days:  # the races' files are what the line reads: the cards alone, no odds or results
        _seed_card(race_db, day)
        _export(pg_instance, race_db, tmp_path / "exports", day.isoformat())
    readme = (REPO_ROOT / "README.md").read_text()
    [line] = re.findall(r"^races = pd\.read_parquet\(.*\)$", readme, flags=re.MULTILINE)
    assert line in DOC.read_text()  # the schema document shows the same line
    monkeypatch.chdir(tmp_path)
    scope = {"pd": pd, "dt": dt}
    exec(line, scope)  # noqa: S102 - the README's own line, run as a user would
    month = scope["races"]
    assert set(month["meeting_date"]) == {dt.date(2026, 11, 1), dt.date(2026, 11, 2)}  # October's day left out
    with race_db.connect() as conn:
        stored = conn.execute(sa.text("SELECT count(*) FROM races JOIN meetings USING (meeting_id) "
                                      "WHERE meeting_date BETWEEN '2026-11-01' AND '2026-11-30'")).scalar()
    assert len(month) == stored
    assert json.dumps(sorted(month.columns)) == json.dumps(sorted(c.name for c in EXPORT_TABLES[1].columns))


BOUNDARY_TABLES = ("runners", "odds", "results", "dividends")


def _races_with_every_table(race_db, day: dt.date) -> list[str]:
    """The day's races that have runners, T-60/T-15 odds, results and dividends, by race id."""
    query = sa.text("SELECT r.race_id FROM races r JOIN meetings m USING (meeting_id) WHERE m.meeting_date = :d "
                    "AND EXISTS (SELECT 1 FROM runners x WHERE x.race_id = r.race_id) "
                    "AND EXISTS (SELECT 1 FROM odds_snapshots x WHERE x.race_id = r.race_id) "
                    "AND EXISTS (SELECT 1 FROM results x WHERE x.race_id = r.race_id) "
                    "AND EXISTS (SELECT 1 FROM dividends x WHERE x.race_id = r.race_id) ORDER BY r.race_id")
    with race_db.connect() as conn:
        return list(conn.execute(query, {"d": day}).scalars())


@pytest.mark.integration
def test_the_day_file_holds_its_first_and_last_instant_and_no_neighbour(race_db, tmp_path) -> None:
    """The day's file of runners, odds, results and dividends holds the rows of the day's meetings (TAB's meeting
    date), however their races are timed: races moved to the day's first and last instant in RACING_TIMEZONE are in
    it; races of the day before and the day after moved one microsecond outside it, or a late race of the day before
    past midnight, are not."""
    from orchestration_core.settings import racing_timezone
    from racing_orchestration.export.writer import export_day
    from racing_orchestration.race_db.queries import local_day_bounds

    before, after = DAY - dt.timedelta(days=1), DAY + dt.timedelta(days=1)
    for day in (before, DAY, after):
        _simulate_racing_day(race_db, day=day)
    first, end = local_day_bounds(DAY, racing_timezone())
    microsecond = dt.timedelta(microseconds=1)
    [late_of_before, last_of_before, *_], [first_of_day, last_of_day, *_], [first_of_after, *_] = (
        _races_with_every_table(race_db, day) for day in (before, DAY, after))
    moved = {last_of_before: first - microsecond, late_of_before: first + dt.timedelta(minutes=30),
             first_of_day: first, last_of_day: end - microsecond, first_of_after: end}
    with race_db.begin() as conn:
        for race_id, start in moved.items():
            conn.execute(sa.text("UPDATE races SET start_time = :s WHERE race_id = :r"), {"s": start, "r": race_id})
    with race_db.connect() as conn:
        export_day(conn, DAY, tmp_path)
    names = {late_of_before: "day before, 00:30 after midnight", last_of_before: "day before, last instant",
             first_of_day: "first instant", last_of_day: "last instant", first_of_after: "day after, first instant"}
    found = {}
    for table in BOUNDARY_TABLES:  # every table checked before the assertion: a failure names all the wrong ones
        rows = _file_rows(tmp_path, table, DAY)
        found[table] = (sorted({names[row["race_id"]] for row in rows if row["race_id"] in names}),
                        sorted({row["meeting_date"].isoformat() for row in rows}))
        if found[table] == (["first instant", "last instant"], [DAY.isoformat()]):
            assert rows == _database_rows(race_db, table, DAY), table
    assert found == {table: (["first instant", "last instant"], [DAY.isoformat()]) for table in BOUNDARY_TABLES}
