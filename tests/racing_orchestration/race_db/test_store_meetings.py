"""Meetings and races from the real 2025-07-17 meetings sample: idempotent upserts, start-time changes, queries."""

from __future__ import annotations

import datetime as dt

import pytest
import sqlalchemy as sa

from racing_orchestration.race_db.queries import race_row, races_for_day, races_starting_between, table_counts
from racing_orchestration.race_db import upsert
from racing_orchestration.race_db.store import UpsertCounts, upsert_meetings
from racing_orchestration.tab.models import Meeting
from tests.racing_orchestration.race_db.conftest import snapshot

pytestmark = pytest.mark.integration


def test_whole_day_stored_twice_changes_nothing(engine: sa.Engine, sample_meetings: list[Meeting]) -> None:
    with engine.begin() as conn:
        first = upsert_meetings(conn, sample_meetings)
    assert first == UpsertCounts(meetings=76, races=748, meetings_changed=76, races_changed=748)
    with engine.connect() as conn:
        counts = table_counts(conn)
        before = snapshot(conn, "meetings"), snapshot(conn, "races")
    assert (counts["meetings"], counts["races"]) == (76, 748)

    with engine.begin() as conn:
        second = upsert_meetings(conn, sample_meetings)
    assert second == UpsertCounts(meetings=76, races=748, meetings_changed=0, races_changed=0)
    with engine.connect() as conn:
        assert table_counts(conn) == counts
        # No updated_at churn: every row, timestamps included, is exactly as before.
        assert (snapshot(conn, "meetings"), snapshot(conn, "races")) == before


def _with_race(meeting: Meeting, index: int, **changes) -> Meeting:
    races = list(meeting.races)
    races[index] = races[index].model_copy(update=changes)
    return meeting.model_copy(update={"races": races})


def test_start_time_change_is_recorded_and_status_updated(engine: sa.Engine, sample_meetings: list[Meeting]) -> None:
    meeting = sample_meetings[0]
    race = meeting.races[0]
    with engine.begin() as conn:
        upsert_meetings(conn, [meeting])
        assert race_row(conn, race.race_id).start_time_changed_at is None
    delayed = race.start_time + dt.timedelta(minutes=7)
    with engine.begin() as conn:
        counts = upsert_meetings(conn, [_with_race(meeting, 0, start_time=delayed, status="Closed")])
    assert (counts.meetings_changed, counts.races_changed) == (0, 1)
    with engine.connect() as conn:
        row = race_row(conn, race.race_id)
        other = race_row(conn, meeting.races[1].race_id)
    assert row.start_time == delayed
    assert row.previous_start_time == race.start_time
    assert row.start_time_changed_at is not None
    assert row.status == "Closed"
    assert other.start_time_changed_at is None  # untouched neighbours stay untouched

    # A status-only change keeps the record of the earlier start-time change.
    with engine.begin() as conn:
        upsert_meetings(conn, [_with_race(meeting, 0, start_time=delayed, status="Final")])
        again = race_row(conn, race.race_id)
    assert (again.status, again.previous_start_time) == ("Final", race.start_time)
    assert again.start_time_changed_at == row.start_time_changed_at


def test_empty_and_duplicated_input(engine: sa.Engine, sample_meetings: list[Meeting]) -> None:
    with engine.begin() as conn:
        assert upsert_meetings(conn, []) == UpsertCounts(0, 0)
        no_races = sample_meetings[0].model_copy(update={"races": []})
        assert upsert_meetings(conn, [no_races]) == UpsertCounts(1, 0, 1, 0)
        # The same meeting twice (a page boundary shifted while paging) is stored once, the last copy winning.
        renamed = sample_meetings[1].model_copy(update={"name": "Renamed"})
        counts = upsert_meetings(conn, [sample_meetings[1], renamed])
        assert (counts.meetings, counts.races) == (1, len(sample_meetings[1].races))
        name = conn.execute(sa.text("SELECT name FROM meetings WHERE meeting_id = :m"), {"m": renamed.meeting_id})
        assert name.scalar_one() == "Renamed"


def test_races_starting_between_and_for_day(engine: sa.Engine, sample_meetings: list[Meeting]) -> None:
    with engine.begin() as conn:
        upsert_meetings(conn, sample_meetings)
    races = [r for m in sample_meetings for r in m.races]
    start, end = dt.datetime(2025, 7, 17, 0, 0, tzinfo=dt.UTC), dt.datetime(2025, 7, 17, 4, 0, tzinfo=dt.UTC)
    in_window = [r for r in races if start <= r.start_time < end]
    open_in_window = [r for r in in_window if r.status.casefold() not in ("interim", "final", "abandoned")]
    with engine.connect() as conn:
        everything = races_starting_between(conn, start, end, statuses_excluded=())
        pending = races_starting_between(conn, start, end)
        day = races_for_day(conn, dt.date(2025, 7, 17), "Pacific/Auckland")
        utc_day = races_for_day(conn, dt.date(2025, 7, 17), "UTC")
    assert {r.race_id for r in everything} == {r.race_id for r in in_window} and in_window
    assert {r.race_id for r in pending} == {r.race_id for r in open_in_window}
    assert [r.start_time for r in everything] == sorted(r.start_time for r in everything)
    assert everything[0].meeting_name  # joined from meetings, for run tags
    nz_start = dt.datetime(2025, 7, 16, 12, 0, tzinfo=dt.UTC)  # 2025-07-17 00:00 NZST
    nz_end = nz_start + dt.timedelta(days=1)
    assert {r.race_id for r in day} == {r.race_id for r in races if nz_start <= r.start_time < nz_end}
    assert {r.race_id for r in day} != {r.race_id for r in utc_day}  # the timezone matters


def test_races_starting_between_uses_the_start_time_index(engine: sa.Engine, sample_meetings: list[Meeting]) -> None:
    with engine.begin() as conn:
        upsert_meetings(conn, sample_meetings)
        conn.execute(sa.text("ANALYZE races"))
        conn.execute(sa.text("SET LOCAL enable_seqscan = off"))
        plan = "\n".join(
            conn.execute(
                sa.text("EXPLAIN SELECT race_id FROM races WHERE start_time >= :a AND start_time < :b"),
                {"a": dt.datetime(2025, 7, 17, tzinfo=dt.UTC), "b": dt.datetime(2025, 7, 17, 1, tzinfo=dt.UTC)},
            ).scalars()
        )
    assert "ix_races_start_time" in plan


def test_naive_bounds_and_unknown_race(engine: sa.Engine) -> None:
    with engine.connect() as conn:
        assert race_row(conn, "no-such-race") is None
        with pytest.raises(ValueError, match="start must be timezone-aware"):
            races_starting_between(conn, dt.datetime(2025, 7, 17), dt.datetime(2025, 7, 18, tzinfo=dt.UTC))


def test_changed_counts_add_up_over_insert_pages(
    engine: sa.Engine, sample_meetings: list[Meeting], monkeypatch: pytest.MonkeyPatch
) -> None:
    # Rows go out in pages of PAGE_ROWS (SQLAlchemy's insertmanyvalues); the counts must cover every page, not
    # just the last one. 748 races in pages of 100 is 8 INSERTs.
    monkeypatch.setattr(upsert, "PAGE_ROWS", 100)
    race_inserts = []

    @sa.event.listens_for(engine, "before_cursor_execute")
    def count_race_inserts(conn, cursor, statement, parameters, context, executemany) -> None:
        if statement.startswith("INSERT INTO races"):
            race_inserts.append(statement)

    with engine.begin() as conn:
        assert upsert_meetings(conn, sample_meetings).races_changed == 748
    assert len(race_inserts) == 8
    with engine.begin() as conn:
        assert upsert_meetings(conn, sample_meetings).races_changed == 0
    # One race in the first page and one in the last change: both are counted.
    races = sorted((r for m in sample_meetings for r in m.races), key=lambda r: r.race_id)
    changed_ids = {races[0].race_id, races[-1].race_id}
    renamed = [
        m.model_copy(update={"races": [r.model_copy(update={"name": "Renamed"}) if r.race_id in changed_ids else r
                                       for r in m.races]})
        for m in sample_meetings
    ]
    with engine.begin() as conn:
        assert upsert_meetings(conn, renamed).races_changed == 2
