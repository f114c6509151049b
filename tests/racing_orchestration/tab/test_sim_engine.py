"""The simulated feed's engine without sockets: determinism, the racing day, the status lifecycle, faults, stats."""

from __future__ import annotations

import datetime as dt
import json
from typing import Any

import pytest

from racing_orchestration.tab.models import parse_event_response, parse_meetings_response
from racing_orchestration.tab.sim_day import NZ_TZ, SimMeeting, SimRace, generate_day
from racing_orchestration.tab.sim_engine import SimFeed, SimFeedConfig

pytestmark = pytest.mark.unit

START = dt.datetime(2026, 3, 10, 18, 0, tzinfo=dt.UTC)  # 07:00 NZDT on 11 March: a morning scrape
PREFIX = "/affiliates/v1/racing"


class FakeClock:
    def __init__(self, start: dt.datetime = START) -> None:
        self.moment = start

    def __call__(self) -> dt.datetime:
        return self.moment

    def set(self, moment: dt.datetime) -> None:
        self.moment = moment


def get(feed: SimFeed, target: str) -> tuple[int, Any]:
    response = feed.handle("GET", target, {"User-Agent": "test"})
    return response.status, json.loads(response.body)


def nz_today(feed: SimFeed) -> dt.date:
    return feed.now().astimezone(NZ_TZ).date()


def plain_race(meetings: list[SimMeeting], country: str = "NZ") -> tuple[SimMeeting, SimRace]:
    """A race that is neither delayed nor abandoned and has at least five finishers."""
    return next((m, r) for m in meetings if m.country == country for r in m.races
                if not r.delay and r.abandoned_at is None and len(r.finish_order) >= 5)


def test_same_seed_same_day_and_different_seed_different_day() -> None:
    bodies = []
    for seed in (7, 7, 8):
        feed = SimFeed(SimFeedConfig(seed=seed), now=FakeClock())
        bodies.append(get(feed, f"{PREFIX}/meetings?date_from=2026-03-11&date_to=2026-03-11")[1])
    assert bodies[0] == bodies[1]
    ids = [{m["meeting"] for m in body["data"]["meetings"]} for body in bodies]
    assert ids[0] == ids[1] and not ids[0] & ids[2]


def test_today_and_tomorrow_have_nz_and_aus_racing_in_every_category() -> None:
    feed = SimFeed(SimFeedConfig(seed=1), now=FakeClock())
    today = nz_today(feed)
    assert today == dt.date(2026, 3, 11)
    for day in (today, today + dt.timedelta(days=1)):
        for country in ("NZ", "AUS"):
            for category in "THG":
                status, body = get(feed, f"{PREFIX}/meetings?date_from={day}&date_to={day}&category={category}"
                                         f"&country={country}")
                meetings = parse_meetings_response(body)
                assert status == 200 and meetings, (day, country, category)
                assert all(m.date == day and m.category == category and m.country == country for m in meetings)
                assert all(6 <= len(m.races) <= 12 for m in meetings)
    # Some combinations legitimately have no racing.
    assert get(feed, f"{PREFIX}/meetings?date_from={today}&category=H&country=UK")[1]["data"]["meetings"] == []


def test_whole_day_shape_matches_the_real_api() -> None:
    feed = SimFeed(SimFeedConfig(seed=1), now=FakeClock())
    status, body = get(feed, f"{PREFIX}/meetings?limit=200")  # no date: today, as the real API defaults
    assert status == 200 and set(body) == {"header", "params", "data"}
    assert body["header"]["title"] == "Race Meetings" and body["params"]["limit"] == 200
    raw = body["data"]["meetings"][0]
    assert {"meeting", "name", "date", "category", "category_name", "country", "state", "races"} <= set(raw)
    assert raw["date"].endswith("T00:00:00Z") and raw["races"][0]["start_time"].endswith("Z")
    meetings = parse_meetings_response(body)
    assert {m.country for m in meetings} >= {"NZ", "AUS", "UK", "USA"}
    assert {m.category for m in meetings} == {"T", "H", "G"}


def test_day_cache_is_bounded_and_evicted_days_come_back_identical(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("racing_orchestration.tab.sim_engine.MAX_CACHED_DAYS", 2)
    clock = FakeClock()
    feed = SimFeed(SimFeedConfig(seed=1), now=clock)
    first = get(feed, f"{PREFIX}/meetings?date_from=2026-03-11")[1]
    race_id = first["data"]["meetings"][0]["races"][0]["id"]
    for day in ("2026-03-20", "2026-03-21"):
        get(feed, f"{PREFIX}/meetings?date_from={day}")
    assert race_id not in feed._races  # noqa: SLF001 - the eviction is the point
    assert get(feed, f"{PREFIX}/meetings?date_from=2026-03-11")[1] == first
    assert get(feed, f"{PREFIX}/events/{race_id}")[0] == 200


def test_paging_and_limit_cap() -> None:
    feed = SimFeed(SimFeedConfig(seed=1), now=FakeClock())
    everything = get(feed, f"{PREFIX}/meetings?date_from=2026-03-11&limit=500")[1]
    assert everything["params"]["limit"] == 200
    all_ids = [m["meeting"] for m in everything["data"]["meetings"]]
    paged: list[str] = []
    for offset in range(0, len(all_ids) + 5, 5):
        paged += [m["meeting"] for m in get(feed, f"{PREFIX}/meetings?date_from=2026-03-11&limit=5&offset={offset}")[1][
            "data"]["meetings"]]
    assert paged == all_ids and len(all_ids) > 20


def test_status_lifecycle_follows_the_clock() -> None:
    clock = FakeClock()
    feed = SimFeed(SimFeedConfig(seed=3, interim_after_seconds=120, final_after_seconds=480), now=clock)
    meeting, race = plain_race(feed.day(dt.date(2026, 3, 11)))
    target = f"{PREFIX}/events/{race.race_id}"

    def event_at(moment: dt.datetime):
        clock.set(moment)
        return parse_event_response(get(feed, target)[1])

    early = event_at(race.scheduled_start - dt.timedelta(hours=5))
    near = event_at(race.scheduled_start - dt.timedelta(minutes=1))
    assert early.race.status == near.race.status == "Open"
    assert early.results == [] and early.dividends == []
    drifted = [(a.odds.fixed_win, b.odds.fixed_win) for a, b in zip(early.runners, near.runners, strict=True)
               if a.odds.fixed_win is not None and b.odds.fixed_win is not None]
    assert any(a != b for a, b in drifted)  # odds drift before the jump
    closed = event_at(race.scheduled_start + dt.timedelta(seconds=1))
    assert closed.race.status == "Closed" and closed.race.actual_start is not None and closed.results == []
    interim = event_at(race.scheduled_start + dt.timedelta(seconds=121))
    assert interim.is_interim and interim.results and {d.status for d in interim.dividends} == {"Interim"}
    assert [r.runner_number for r in interim.results] == list(race.finish_order)
    final = event_at(race.scheduled_start + dt.timedelta(seconds=481))
    assert final.is_final
    interim_rows = [(d.product_name, d.positions) for d in final.dividends if d.status == "Interim"]
    final_rows = [(d.product_name, d.positions) for d in final.dividends if d.status == "Final"]
    assert interim_rows == final_rows and len(final.final_dividends()) == len(interim.dividends)
    win = next(d for d in final.final_dividends() if d.product_name == "Pool Win")
    assert win.positions == [(race.finish_order[0], 1)]
    # Prices froze at the jump.
    later = event_at(race.scheduled_start + dt.timedelta(hours=2))
    assert [r.odds for r in later.runners] == [r.odds for r in final.runners]
    meeting_view = parse_meetings_response(get(feed, f"{PREFIX}/meetings/{meeting.meeting_id}")[1])[0]
    assert next(r for r in meeting_view.races if r.race_id == race.race_id).status == "Final"


def test_abandoned_and_delayed_races() -> None:
    days = [generate_day(1, dt.date(2026, 3, 11) + dt.timedelta(days=n)) for n in range(3)]
    races = [(m, r) for day in days for m in day for r in m.races]
    abandoned = [(m, r) for m, r in races if r.abandoned_at is not None]
    delayed = [(m, r) for m, r in races if r.delay and r.abandoned_at is None]
    assert 0 < len(abandoned) < len(races) * 0.1 and 0 < len(delayed) < len(races) * 0.15
    clock = FakeClock()
    feed = SimFeed(SimFeedConfig(seed=1), now=clock)
    _, race = abandoned[0]
    clock.set(race.abandoned_at - dt.timedelta(seconds=1))
    assert parse_event_response(get(feed, f"{PREFIX}/events/{race.race_id}")[1]).race.status == "Open"
    clock.set(race.scheduled_start + dt.timedelta(hours=1))
    event = parse_event_response(get(feed, f"{PREFIX}/events/{race.race_id}")[1])
    assert event.is_abandoned and event.results == [] and event.dividends == []

    _, race = delayed[0]
    clock.set(race.scheduled_start - dt.timedelta(minutes=30))
    event = parse_event_response(get(feed, f"{PREFIX}/events/{race.race_id}")[1])
    assert event.race.advertised_start == race.scheduled_start
    clock.set(race.scheduled_start + dt.timedelta(seconds=30))  # past the old time, before the new one
    event = parse_event_response(get(feed, f"{PREFIX}/events/{race.race_id}")[1])
    assert event.race.advertised_start == race.scheduled_start + race.delay and event.race.status == "Open"


def test_scratched_runners_have_no_odds() -> None:
    day = generate_day(1, dt.date(2026, 3, 11))
    meeting, race = next((m, r) for m in day for r in m.races if any(x.scratched_at for x in r.runners))
    feed = SimFeed(SimFeedConfig(seed=1), now=FakeClock(race.scheduled_start))
    raw = get(feed, f"{PREFIX}/events/{race.race_id}")[1]
    event = parse_event_response(raw)
    scratched = [r for r in event.runners if r.is_scratched]
    assert scratched and all(r.odds.fixed_win is None and r.scratch_time is not None for r in scratched)
    assert all("odds" not in r for r in raw["data"]["runners"] if r["is_scratched"])
    assert {r.runner_number for r in scratched}.isdisjoint(race.finish_order)


def test_dense_mode_runs_races_every_few_minutes_through_a_short_lifecycle() -> None:
    clock = FakeClock()
    config = SimFeedConfig(seed=5, dense_every_minutes=1.0, dense_races=12, interim_after_seconds=120,
                           final_after_seconds=480)
    feed = SimFeed(config, now=clock)
    meetings = parse_meetings_response(get(feed, f"{PREFIX}/meetings")[1])
    starts = sorted(r.start_time for m in meetings for r in m.races)
    assert len(starts) == 12 and len(meetings) == 2
    assert starts[0] == (START + dt.timedelta(minutes=1)).replace(microsecond=0)
    assert all(b - a == dt.timedelta(minutes=1) for a, b in zip(starts, starts[1:]))
    first = next(r for m in meetings for r in m.races if r.start_time == starts[0])
    statuses = []
    for seconds in (30, 61, 181, 541):
        clock.set(START + dt.timedelta(seconds=seconds))
        statuses.append(parse_event_response(get(feed, f"{PREFIX}/events/{first.race_id}")[1]).race.status)
    assert statuses == ["Open", "Closed", "Interim", "Final"]
    # Dense mode serves only its own races: tomorrow is empty.
    assert get(feed, f"{PREFIX}/meetings?date_from=2026-03-12")[1]["data"]["meetings"] == []


def test_speed_and_clock_offset_move_simulated_time() -> None:
    clock = FakeClock()
    feed = SimFeed(SimFeedConfig(speed=60, clock_offset_seconds=3600), now=clock)
    assert feed.now() == START + dt.timedelta(hours=1)
    clock.set(START + dt.timedelta(seconds=10))
    assert feed.now() == START + dt.timedelta(hours=1, minutes=10)


def test_not_found_and_bad_request_envelopes() -> None:
    feed = SimFeed(SimFeedConfig(), now=FakeClock())
    status, body = get(feed, f"{PREFIX}/events/no-such-race")
    assert status == 404 and set(body["header"]) == {"error", "error_code", "title", "url", "generated_time"}
    assert get(feed, f"{PREFIX}/meetings/nope")[0] == 404
    assert get(feed, "/somewhere/else")[0] == 404
    status, body = get(feed, f"{PREFIX}/meetings?date_from=tomorrowish")
    assert status == 400 and "invalid date 'tomorrowish'" in body["header"]["error"]
    assert feed.handle("POST", f"{PREFIX}/meetings", {}).status == 405


def _fault_sequence(seed: int, n: int = 200) -> list[str | None]:
    config = SimFeedConfig(seed=seed, error_5xx_rate=0.1, timeout_rate=0.05, malformed_rate=0.05, rate_limit_rate=0.1)
    feed = SimFeed(config, now=FakeClock())
    return [feed.draw_fault() for _ in range(n)]


def test_faults_are_deterministic_per_seed_and_follow_the_rates() -> None:
    first, again, other = _fault_sequence(11), _fault_sequence(11), _fault_sequence(12)
    assert first == again and first != other
    counts = {kind: first.count(kind) for kind in ("5xx", "timeout", "malformed", "429")}
    assert 8 <= counts["5xx"] <= 35 and 8 <= counts["429"] <= 35 and 1 <= counts["timeout"] <= 20
    assert 120 <= first.count(None) <= 170


def test_fault_responses_and_queue() -> None:
    feed = SimFeed(SimFeedConfig(retry_after_seconds=2, timeout_fault_seconds=3), now=FakeClock())
    feed.queue_faults("5xx", "429", "malformed", "timeout")
    target = f"{PREFIX}/meetings"
    assert feed.handle("GET", target, {}).status == 503
    limited = feed.handle("GET", target, {})
    assert limited.status == 429 and limited.headers["Retry-After"] == "2"
    malformed = feed.handle("GET", target, {})
    assert malformed.status == 200
    with pytest.raises(json.JSONDecodeError):
        json.loads(malformed.body)
    dropped = feed.handle("GET", target, {})
    assert dropped.drop and dropped.hold_seconds == 3
    assert feed.handle("GET", target, {}).status == 200
    with pytest.raises(ValueError, match="unknown fault kinds"):
        feed.queue_faults("meteor")
    assert feed.stats()["faults"] == {"5xx": 1, "429": 1, "malformed": 1, "timeout": 1}


def test_stats_count_per_endpoint_and_reset() -> None:
    feed = SimFeed(SimFeedConfig(latency_ms=100), now=FakeClock())
    response = feed.handle("GET", f"{PREFIX}/meetings?category=T", {"X-Partner": "me"})
    assert response.hold_seconds == pytest.approx(0.1)
    race_id = parse_meetings_response(json.loads(response.body))[0].races[0].race_id
    feed.handle("GET", f"{PREFIX}/events/{race_id}", {})
    feed.handle("GET", f"{PREFIX}/events/{race_id}", {})
    feed.queue_faults("5xx")
    feed.handle("GET", f"{PREFIX}/events/{race_id}", {})  # a failed answer is not a served event
    status, stats = get(feed, "/_sim/stats?reset=1")
    assert stats["requests"] == {"/meetings": 1, "/events/{id}": 3} and stats["total"] == 4
    assert stats["statuses"] == {"200": 3, "503": 1}
    assert stats["events_served"] == {race_id: 2}
    assert get(feed, "/_sim/stats")[1]["total"] == 0
    feed.handle("GET", f"{PREFIX}/meetings", {})
    assert feed.handle("POST", "/_sim/stats/reset", {}).status == 200
    assert feed.stats()["total"] == 0
    assert feed.handle("POST", "/_sim/faults", {}, b'["5xx"]').status == 200
    assert feed.handle("POST", "/_sim/faults", {}, b'["nope"]').status == 400
    assert feed.handle("GET", f"{PREFIX}/meetings", {}).status == 503
    assert feed.handle("GET", "/_sim/unknown", {}).status == 404


def test_events_latency_slows_only_the_events_endpoint() -> None:
    feed = SimFeed(SimFeedConfig(latency_ms=100, events_latency_ms=7000), now=FakeClock())
    meetings = feed.handle("GET", f"{PREFIX}/meetings?category=T", {})
    assert meetings.hold_seconds == pytest.approx(0.1)
    race_id = parse_meetings_response(json.loads(meetings.body))[0].races[0].race_id
    assert feed.handle("GET", f"{PREFIX}/events/{race_id}", {}).hold_seconds == pytest.approx(7.1)
