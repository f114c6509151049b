"""The `racing_day` asset and its completeness checks on a real race database and Dagster instance, and the sensor
that runs them once the day's last race has settled."""

import datetime as dt

import dagster as dg
import pytest
import sqlalchemy as sa

from racing_orchestration.checkpoints import sensors
from racing_orchestration.checkpoints.racing_day import (
    PRE_RACE_CHECK,
    RESULTS_CHECK,
    SETTLE_AFTER_LAST_START,
    completeness_run_key,
    days_to_check,
    plan_completeness_runs,
    racing_day,
    racing_day_completeness_sensor,
)
from racing_orchestration.race_db import schema
from racing_orchestration.race_db.resource import RaceDatabase
from tests.racing_orchestration.race_db.test_completeness import DAY, START, _at, _seed


def _check_results(result: dg.ExecuteInProcessResult) -> dict[str, dg.AssetCheckEvaluation]:
    return {e.check_name: e for e in result.get_asset_check_evaluations()}


@pytest.mark.integration
def test_checks_fail_on_a_gap_and_pass_once_it_is_filled(pg_instance, race_db: RaceDatabase, monkeypatch) -> None:
    with race_db.begin() as conn:
        _seed(conn)
        # r3 started and finished with nothing stored and no ledger row: data lost without a reason.
        conn.execute(sa.insert(schema.races).values(race_id="r3", meeting_id="m1", race_number=3, name="R3",
                                                    start_time=_at(60), status="Open"))
    monkeypatch.setattr(sensors, "sensor_now", lambda: _at(180))

    def materialize() -> dict[str, dg.AssetCheckEvaluation]:
        result = dg.materialize([racing_day], partition_key=DAY.isoformat(), instance=pg_instance,
                                resources={"race_db": race_db}, raise_on_error=False)
        assert result.success  # a failed check is a finding, not a failed run
        return _check_results(result)

    checks = materialize()
    pre, results = checks[PRE_RACE_CHECK], checks[RESULTS_CHECK]
    assert not pre.passed and pre.severity == dg.AssetCheckSeverity.ERROR
    meta = {k: v.value for k, v in pre.metadata.items()}
    assert (meta["expected"], meta["captured"], meta["explained"], meta["missing"]) == (6, 3, 1, 2)
    assert meta["day"] == DAY.isoformat() and meta["completeness"] == pytest.approx(4 / 6)
    assert "| r3 | t15 | missing | no snapshot and no ledger row |" in meta["gaps"]
    assert not results.passed and {k: v.value for k, v in results.metadata.items()}["pending"] == 1

    # The sensor's runs and the ledger settle the day: r3 skipped with a reason, r2's chain ends provisional.
    with race_db.begin() as conn:
        conn.execute(sa.insert(schema.race_checkpoints), [
            {"race_id": "r3", "checkpoint": cp, "scheduled_for": _at(60), "state": "skipped", "note": "race started"}
            for cp in ("t60", "t15")
        ] + [{"race_id": "r3", "checkpoint": "post", "scheduled_for": _at(65), "state": "provisional",
              "note": "race still Open after 4 checks"}])
        conn.execute(sa.update(schema.race_checkpoints).where(schema.race_checkpoints.c.race_id == "r2",
                                                              schema.race_checkpoints.c.checkpoint == "post")
                     .values(state="provisional"))
    checks = materialize()
    assert checks[PRE_RACE_CHECK].passed and checks[RESULTS_CHECK].passed
    stored = pg_instance.event_log_storage.get_latest_asset_check_execution_by_key(
        [dg.AssetCheckKey(dg.AssetKey("racing_day"), PRE_RACE_CHECK)])
    assert len(stored) == 1  # recorded in the instance, where the UI and /metrics read it


@pytest.mark.unit
@pytest.mark.parametrize(
    ("now", "requested", "reason"),
    [
        (START + SETTLE_AFTER_LAST_START - dt.timedelta(seconds=1), False, "waiting until 03:45 UTC"),
        (START + SETTLE_AFTER_LAST_START, True, ""),
    ],
)
def test_a_day_is_checked_once_its_last_race_has_settled(now: dt.datetime, requested: bool, reason: str) -> None:
    requests, reasons = plan_completeness_runs({DAY: START}, now, "Pacific/Auckland")
    assert [(r.partition_key, r.run_key) for r in requests] == (
        [(DAY.isoformat(), "racing_day:2026-11-29:20261129T0300")] if requested else [])
    assert reasons == ([] if requested else [f"{DAY}: {reason} (last race starts 03:00 UTC)"])


@pytest.mark.unit
@pytest.mark.parametrize(
    ("now", "requested"),
    [
        (dt.datetime(2026, 11, 29, 10, 59, tzinfo=dt.UTC), False),  # 23:59 NZDT on the day
        (dt.datetime(2026, 11, 29, 11, 0, tzinfo=dt.UTC), True),  # midnight: the day is over
    ],
)
def test_a_day_without_races_is_checked_once_it_is_over(now: dt.datetime, requested: bool) -> None:
    requests, reasons = plan_completeness_runs({DAY: None}, now, "Pacific/Auckland")
    assert [r.run_key for r in requests] == (["racing_day:2026-11-29:no-races"] if requested else [])
    assert reasons == ([] if requested else [f"{DAY}: no races stored"])


@pytest.mark.unit
def test_run_key_changes_when_a_later_race_is_added() -> None:
    assert completeness_run_key(DAY, START) == "racing_day:2026-11-29:20261129T0300"
    assert completeness_run_key(DAY, _at(20)) == "racing_day:2026-11-29:20261129T0320"  # a later last start: checked again
    assert completeness_run_key(DAY, None) == "racing_day:2026-11-29:no-races"


@pytest.mark.unit
@pytest.mark.parametrize(
    ("now", "days"),
    [
        (dt.datetime(2026, 11, 29, 10, 59, tzinfo=dt.UTC), [dt.date(2026, 11, 28), dt.date(2026, 11, 29)]),
        (dt.datetime(2026, 11, 29, 11, 0, tzinfo=dt.UTC), [dt.date(2026, 11, 29), dt.date(2026, 11, 30)]),  # NZDT
    ],
)
def test_days_to_check_are_today_and_yesterday_in_the_racing_timezone(now, days) -> None:
    assert days_to_check(now, "Pacific/Auckland") == days


@pytest.mark.integration
def test_sensor_requests_the_settled_day_with_a_stable_key(race_db: RaceDatabase, monkeypatch) -> None:
    with race_db.begin() as conn:
        _seed(conn)  # the day's last race starts at _at(30)
    monkeypatch.setattr(sensors, "sensor_now", lambda: _at(30) + SETTLE_AFTER_LAST_START - dt.timedelta(minutes=1))
    with dg.build_sensor_context(resources={"race_db": race_db}) as context:
        first = racing_day_completeness_sensor(context)
    yesterday = DAY - dt.timedelta(days=1)
    assert [r.partition_key for r in first.run_requests] == [yesterday.isoformat()]  # today's last race not settled
    monkeypatch.setattr(sensors, "sensor_now", lambda: _at(30) + SETTLE_AFTER_LAST_START)
    with dg.build_sensor_context(resources={"race_db": race_db}) as context:
        second = racing_day_completeness_sensor(context)
    # Yesterday's request repeats under the same key (Dagster drops it); today's is new.
    assert [(r.partition_key, r.run_key) for r in second.run_requests] == [
        ("2026-11-28", first.run_requests[0].run_key), ("2026-11-29", "racing_day:2026-11-29:20261129T0330")]
    with race_db.begin() as conn:
        conn.execute(sa.delete(schema.races).where(schema.races.c.race_id.in_(["r0", "r1", "r2"])))
    with dg.build_sensor_context(resources={"race_db": race_db}) as context:
        third = racing_day_completeness_sensor(context)
    # Yesterday is over (NZ time) and has no races left: checked once, so every day has a check on record.
    assert [r.run_key for r in third.run_requests] == ["racing_day:2026-11-28:no-races"]
    monkeypatch.setattr(sensors, "sensor_now", lambda: dt.datetime(2026, 11, 29, 11, 30, tzinfo=dt.UTC))
    with race_db.begin() as conn:
        conn.execute(sa.delete(schema.races))
    with dg.build_sensor_context(resources={"race_db": race_db}) as context:
        after_midnight = racing_day_completeness_sensor(context)  # 00:30 NZDT on the 30th: the 29th is over
    assert [r.run_key for r in after_midnight.run_requests] == ["racing_day:2026-11-29:no-races"]
