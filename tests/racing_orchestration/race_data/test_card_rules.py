"""Pure rules of the stored cards: per-day outcomes and their reasons, which failed combinations are retried, and the
three card checks."""

import datetime as dt

import dagster as dg
import pytest

from racing_orchestration.ingestion.combinations import (
    CombinationResult,
    ScrapeCombination,
    day_outcomes,
    retries_after_error,
)
from racing_orchestration.race_data.card_checks import (
    CardCheck,
    CardFacts,
    CardRace,
    Runners,
    card_checks,
    check_evaluations,
    checks_while_scraping,
    runners_due,
)

pytestmark = pytest.mark.unit

TODAY = dt.date(2026, 11, 29)
NOON_NZ = dt.datetime(2026, 11, 28, 23, 0, tzinfo=dt.UTC)  # 12:00 on TODAY in Pacific/Auckland (NZDT)
TZ = "Pacific/Auckland"


def _result(day: dt.date, status: str, country: str = "NZ", meetings: int = 0, http_status: int | None = None,
            error: str | None = None) -> CombinationResult:
    return CombinationResult(ScrapeCombination("T", country, day), status, meetings=meetings, races=meetings * 8,
                             api_requests=1, error=error, http_status=http_status)


@pytest.mark.parametrize(
    ("day", "transient", "retried"),
    [
        (TODAY - dt.timedelta(days=1), False, False),  # a past day TAB refuses with a 4xx: it will not come back
        (TODAY - dt.timedelta(days=1), True, True),  # a 503 on a past day may clear in 30 minutes
        (TODAY, False, True),  # today's and tomorrow's 4xx keep the morning scrape's retries
        (TODAY + dt.timedelta(days=1), False, True),
    ],
)
def test_which_failed_combinations_are_retried(day, transient, retried) -> None:
    assert retries_after_error(day, NOON_NZ, TZ, transient) is retried


def test_day_outcomes_group_by_day_and_count_what_was_stored() -> None:
    past = TODAY - dt.timedelta(days=2)
    outcomes = day_outcomes([
        _result(TODAY, "ok", meetings=3), _result(TODAY, "failed", "AUS", http_status=503, error="HTTP 503"),
        _result(past, "failed", http_status=404, error="HTTP 404 gone"),
        _result(past, "failed", "AUS", http_status=404, error="HTTP 404 gone"),
    ])
    assert [o.day for o in outcomes] == [past, TODAY]
    gone, today = outcomes
    assert (today.stored, today.ok, today.failed, today.meetings, today.races) == (True, 1, 1, 3, 24)
    assert today.reason(TODAY) is None
    assert (gone.stored, gone.gone, gone.failed) == (False, True, 2)
    assert gone.reason(TODAY).startswith(f"{past}: TAB no longer serves this day: 2 of 2 combinations were refused")


@pytest.mark.parametrize(
    ("day", "results", "reason"),
    [
        (TODAY - dt.timedelta(days=3), [("empty", None)],
         "TAB listed no meetings in any of 1 combinations (a past day)"),
        (TODAY, [("empty", None)], "TAB lists no meetings yet in any of 1 combinations (today)"),
        (TODAY - dt.timedelta(days=3), [("failed", 503)], "nothing stored: 1 of 1 combinations failed"),
        (TODAY - dt.timedelta(days=3), [("failed", 404), ("failed", 503)], "nothing stored: 2 of 2"),
        (TODAY, [("failed", 404)], "nothing stored: 1 of 1 combinations failed"),  # today's 4xx is not "gone"
    ],
)
def test_a_day_that_stored_nothing_says_why(day, results, reason) -> None:
    [outcome] = day_outcomes([_result(day, status, country, http_status=code, error=f"HTTP {code}" if code else None)
                              for (status, code), country in zip(results, ("NZ", "AUS"), strict=False)])
    assert not outcome.stored and reason in outcome.reason(TODAY)


def _race(n: int, start: dt.datetime, runners: int = 8, status: str = "Open") -> CardRace:
    return CardRace(f"r{n}", "Ellerslie", n, start, status, runners)


def _checks(facts: CardFacts, now: dt.datetime = NOON_NZ) -> dict[str, tuple[bool, str]]:
    return {c.name: (c.passed, c.description) for c in card_checks(facts, now, TZ)}


def test_an_empty_card_fails_card_not_empty() -> None:
    checks = _checks(CardFacts(TODAY, 0, ()))
    assert checks["card_not_empty"] == (False, f"{TODAY}: no races stored")
    assert checks["races_have_runners"][0] and checks["start_times_on_day"][0]
    assert _checks(CardFacts(TODAY, 2, ()))["card_not_empty"] == (False, f"{TODAY}: no races stored under 2 meetings")


@pytest.mark.parametrize(
    ("before_start", "runners", "status", "t60", "standing"),
    [
        (dt.timedelta(minutes=60, seconds=1), 0, "Open", None, Runners.NOT_YET),  # a second before T-60
        (dt.timedelta(minutes=60), 0, "Open", None, Runners.AWAITING),  # exactly T-60: its run is due, not ended
        (dt.timedelta(minutes=60), 0, "Open", "requested", Runners.AWAITING),
        (dt.timedelta(minutes=60), 0, "Open", "done", Runners.DUE),  # exactly T-60 and its run has ended
        (dt.timedelta(minutes=60), 9, "Open", "done", Runners.DUE),
        (dt.timedelta(minutes=59), 0, "Open", "running", Runners.AWAITING),
        (dt.timedelta(minutes=59), 0, "Open", "requested_late", Runners.AWAITING),  # card stored after its T-60
        (dt.timedelta(minutes=59), 0, "Open", "rescheduled", Runners.AWAITING),
        (dt.timedelta(minutes=59), 0, "Open", "failed", Runners.DUE),
        (dt.timedelta(minutes=59), 0, "Open", "skipped", Runners.DUE),
        (dt.timedelta(minutes=59), 7, "Open", None, Runners.DUE),  # stored already (a manual check)
        (dt.timedelta(seconds=1), 0, "Open", "requested_late", Runners.AWAITING),  # a second before the jump
        (dt.timedelta(0), 0, "Open", "requested_late", Runners.DUE),  # at the jump: no T-60 is taken after it
        (dt.timedelta(0), 0, "Open", None, Runners.DUE),  # a day stored after it was raced, no checkpoint run
        (-dt.timedelta(minutes=30), 0, "Abandoned", "abandoned", Runners.EXEMPT),
        (-dt.timedelta(minutes=30), 0, "abandoned", None, Runners.EXEMPT),
    ],
)
def test_when_a_races_runners_are_due(before_start, runners, status, t60, standing) -> None:
    race = CardRace("r1", "Ellerslie", 1, NOON_NZ + before_start, status, runners, t60)
    assert runners_due(race, NOON_NZ) is standing


@pytest.mark.parametrize(
    ("minutes_to_start", "runners", "status", "t60", "passed"),
    [
        (61, 0, "Open", None, True),  # before T-60: runners are not stored yet
        (60, 0, "Open", None, True),  # exactly T-60, its run not ended: awaiting T-60
        (60, 0, "Open", "done", False),  # exactly T-60, its run ended and stored no runners
        (59, 0, "Open", "requested_late", True),  # the card came after its T-60: the late run is awaited
        (59, 0, "Open", "failed", False),  # past T-60 with no runners: its T-60 run stored nothing
        (59, 9, "Open", "done", True),
        (0, 0, "Open", "requested", False),  # started without a T-60
        (-30, 0, "Abandoned", None, True),  # an abandoned race gets no checkpoints
        (-30, 0, "Final", None, False),
    ],
)
def test_races_past_t60_have_runners(minutes_to_start, runners, status, t60, passed) -> None:
    race = CardRace("r1", "Ellerslie", 1, NOON_NZ + dt.timedelta(minutes=minutes_to_start), status, runners, t60)
    assert _checks(CardFacts(TODAY, 1, (race,)))["races_have_runners"][0] is passed


def test_the_runners_check_says_which_races_await_their_t60() -> None:
    races = (_race(1, NOON_NZ - dt.timedelta(minutes=30), runners=8),
             CardRace("r2", "Ellerslie", 2, NOON_NZ + dt.timedelta(minutes=30), "Open", 0, "requested_late"),
             CardRace("r3", "Ellerslie", 3, NOON_NZ + dt.timedelta(minutes=35), "Open", 0, None))
    [check] = [c for c in card_checks(CardFacts(TODAY, 1, races), NOON_NZ, TZ) if c.name == "races_have_runners"]
    assert check.passed
    assert check.description == f"{TODAY}: all 1 races past T-60 have runners; 2 more awaiting their T-60 run"
    assert (check.metadata["races_past_t60"], check.metadata["races_awaiting_t60"]) == (3, 2)
    assert "Ellerslie R3 (r3), starts 2026-11-29 12:35" in check.metadata["races_awaiting"].value
    ended = CardRace("r2", "Ellerslie", 2, races[1].start_time, "Open", 0, "failed")
    failed = card_checks(CardFacts(TODAY, 1, (ended,)), NOON_NZ, TZ)[1]
    assert (failed.passed, failed.description) == (False, f"{TODAY}: 1 of 1 races past T-60 have no runners "
                                                          "(no T-60 or later event stored)")


@pytest.mark.parametrize(
    ("start_utc", "passed"),
    [
        (dt.datetime(2026, 11, 28, 11, 0), True),  # 00:00 NZ on the day
        (dt.datetime(2026, 11, 28, 5, 0), True),  # 18:00 NZ the evening before: a US meeting listed under TAB's day
        (dt.datetime(2026, 11, 28, 4, 59), False),
        (dt.datetime(2026, 11, 29, 22, 59), True),  # 11:59 NZ the next day: a UK evening meeting
        (dt.datetime(2026, 11, 29, 23, 0), False),  # 12:00 NZ the next day belongs to that day
        (dt.datetime(2026, 12, 5, 1, 0), False),
    ],
)
def test_start_times_are_on_the_racing_day(start_utc, passed) -> None:
    race = _race(1, start_utc.replace(tzinfo=dt.UTC), status="Final")
    passed_, description = _checks(CardFacts(TODAY, 1, (race,)))["start_times_on_day"]
    assert passed_ is passed, description


def _by_name(facts: CardFacts, now: dt.datetime = NOON_NZ, tz: str = TZ) -> dict[str, object]:
    return {c.name: c for c in card_checks(facts, now, tz)}


def _shown(metadata: dict[str, object]) -> dict[str, object]:
    """The metadata as the UI shows it: markdown values by their text."""
    return {key: getattr(value, "value", value) for key, value in metadata.items()}


def test_a_card_with_every_kind_of_race_reads_in_full() -> None:
    """What the asset checks show an operator: each check's verdict, words and metadata."""
    races = (
        CardRace("r1", "Ellerslie", 1, NOON_NZ - dt.timedelta(minutes=30), "Final", 8, "done"),  # due, has runners
        CardRace("r2", "Ellerslie", 2, NOON_NZ + dt.timedelta(minutes=10), "Open", 0, "failed"),  # due, none
        CardRace("r3", "Trentham", 3, NOON_NZ + dt.timedelta(minutes=40), "Open", 0, "requested"),  # awaiting
        CardRace("r4", "Trentham", 4, dt.datetime(2026, 11, 30, 0, 0, tzinfo=dt.UTC), "Open", 0),  # next day's
    )
    checks = _by_name(CardFacts(TODAY, 2, races))
    not_empty, runners, starts = checks["card_not_empty"], checks["races_have_runners"], checks["start_times_on_day"]
    assert (not_empty.passed, not_empty.description, not_empty.metadata) == (
        True, f"{TODAY}: 2 meetings, 4 races", {"meetings": 2, "races": 4})
    assert (runners.passed, runners.description) == (
        False, f"{TODAY}: 1 of 2 races past T-60 have no runners (no T-60 or later event stored); "
               "1 more awaiting their T-60 run")
    assert _shown(runners.metadata) == {
        "races_past_t60": 3, "races_awaiting_t60": 1, "races_without_runners": 1,
        "races": "- Ellerslie R2 (r2), starts 2026-11-29 12:10",
        "races_awaiting": "- Trentham R3 (r3), starts 2026-11-29 12:40"}
    assert (starts.passed, starts.description) == (False, f"{TODAY}: 1 of 4 races start outside the racing day")
    assert _shown(starts.metadata) == {"races_outside_day": 1, "window_utc": "2026-11-28 05:00 to 2026-11-29 23:00",
                                       "races": "- Trentham R4 (r4), starts 2026-11-30 13:00"}


def test_a_card_that_holds_in_full() -> None:
    races = (CardRace("r1", "Ellerslie", 1, NOON_NZ - dt.timedelta(minutes=30), "Final", 8, "done"),)
    checks = _by_name(CardFacts(TODAY, 1, races))
    runners, starts = checks["races_have_runners"], checks["start_times_on_day"]
    assert (runners.passed, runners.description, runners.metadata) == (
        True, f"{TODAY}: all 1 races past T-60 have runners",
        {"races_past_t60": 1, "races_awaiting_t60": 0, "races_without_runners": 0})
    assert (starts.passed, starts.description, starts.metadata) == (
        True, f"{TODAY}: all 1 races start within the racing day",
        {"races_outside_day": 0, "window_utc": "2026-11-28 05:00 to 2026-11-29 23:00"})


@pytest.mark.parametrize(("minutes_to_start", "t60", "description"), [
    (90, None, f"{TODAY}: no race has reached T-60 yet"),
    (30, "requested", f"{TODAY}: 1 races past T-60 awaiting their T-60 run"),
])
def test_the_runners_check_before_any_race_is_due(minutes_to_start, t60, description) -> None:
    race = CardRace("r1", "Ellerslie", 1, NOON_NZ + dt.timedelta(minutes=minutes_to_start), "Open", 0, t60)
    runners = _by_name(CardFacts(TODAY, 1, (race,)))["races_have_runners"]
    assert (runners.passed, runners.description) == (True, description)


@pytest.mark.parametrize(("meetings", "races", "passed"), [(1, 1, True), (0, 1, False), (1, 0, False)])
def test_card_not_empty_needs_a_meeting_and_a_race(meetings: int, races: int, passed: bool) -> None:
    card = tuple(_race(n, NOON_NZ + dt.timedelta(hours=2)) for n in range(1, races + 1))
    assert _by_name(CardFacts(TODAY, meetings, card))["card_not_empty"].passed is passed


def test_the_racing_day_is_the_configured_zones() -> None:
    """In Sydney (AEDT, +11) the day's window starts and ends two hours later in UTC than Auckland's."""
    race = _race(1, dt.datetime(2026, 11, 28, 6, 30, tzinfo=dt.UTC), status="Final")  # 17:30 Sydney the day before
    starts = _by_name(CardFacts(TODAY, 1, (race,)), tz="Australia/Sydney")["start_times_on_day"]
    assert starts.passed is False
    assert starts.metadata["window_utc"] == "2026-11-28 07:00 to 2026-11-30 01:00"
    assert starts.metadata["races"].value == "- Ellerslie R1 (r1), starts 2026-11-28 17:30"


@pytest.mark.parametrize(("count", "more"), [(20, None), (21, "- (+1 more)"), (23, "- (+3 more)")])
def test_a_long_list_of_races_shows_twenty_and_counts_the_rest(count: int, more: str | None) -> None:
    card = tuple(CardRace(f"r{n}", "Ellerslie", n, NOON_NZ - dt.timedelta(minutes=n), "Final", 0, "done")
                 for n in range(1, count + 1))
    lines = _by_name(CardFacts(TODAY, 1, card))["races_have_runners"].metadata["races"].value.split("\n")
    assert lines[:2] == ["- Ellerslie R1 (r1), starts 2026-11-29 11:59", "- Ellerslie R2 (r2), starts 2026-11-29 11:58"]
    assert len(lines) == 20 + (more is not None)
    assert lines[-1] == (more or "- Ellerslie R20 (r20), starts 2026-11-29 11:40")


def test_while_scraping_only_a_failed_card_not_empty_waits_for_the_summary() -> None:
    def check(name: str, passed: bool) -> CardCheck:
        return CardCheck(name, passed, f"{name} {passed}", {})

    checks = [check("card_not_empty", True), check("card_not_empty", False), check("races_have_runners", False),
              check("start_times_on_day", True)]
    assert checks_while_scraping(checks) == [checks[0], checks[2], checks[3]]


def test_checks_are_recorded_as_error_evaluations_of_the_days_partition() -> None:
    checks = card_checks(CardFacts(TODAY, 0, ()), NOON_NZ, TZ)
    evaluations = check_evaluations(checks, TODAY)
    assert [(e.asset_key, e.check_name, e.passed, e.partition, e.severity, e.description) for e in evaluations] == [
        (dg.AssetKey("race_cards"), c.name, c.passed, "2026-11-29", dg.AssetCheckSeverity.ERROR, c.description)
        for c in checks]
    assert [_shown(e.metadata) for e in evaluations] == [_shown(c.metadata) for c in checks]
