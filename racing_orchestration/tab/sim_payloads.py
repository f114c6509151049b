"""JSON bodies of the simulated feed, in the real API's shapes (see tests/racing_orchestration/tab/samples), at a given
instant."""

from __future__ import annotations

import datetime as dt
import uuid
from dataclasses import dataclass
from typing import Any
from zoneinfo import ZoneInfo

from racing_orchestration.tab.models import ABANDONED, CLOSED, FINAL, INTERIM, OPEN, status_is
from racing_orchestration.tab.sim_day import CATEGORY_NAMES, NZ_TZ, SimMeeting, SimRace, SimRunner

_DIVIDEND_NS = uuid.UUID("6f1c3a52-3c1e-4c4e-9a51-3d0f0e7a8b21")


@dataclass(frozen=True)
class Lifecycle:
    """How long after the jump a race turns Interim, then Final."""

    interim_after: dt.timedelta
    final_after: dt.timedelta


def iso_z(moment: dt.datetime) -> str:
    return moment.astimezone(dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def go_time(moment: dt.datetime) -> str:
    # Go's time.String() layout, as in `advertised_start_string`.
    return moment.astimezone(dt.UTC).strftime("%Y-%m-%d %H:%M:%S +0000 UTC")


def envelope(title: str, url: str, now: dt.datetime, params: dict[str, Any], data: dict[str, Any]) -> dict[str, Any]:
    generated = now.astimezone(dt.UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")
    return {"header": {"title": title, "generated_time": generated, "url": url}, "params": params, "data": data}


def error_envelope(title: str, url: str, now: dt.datetime, error: str, code: str) -> dict[str, Any]:
    header = {"error": error, "error_code": code, "title": title, "url": url, "generated_time": iso_z(now)}
    return {"header": header}


def _tick(price: float) -> float:
    step = 0.05 if price < 3 else 0.1 if price < 6 else 0.5 if price < 20 else 1.0
    return round(max(1.01, round(price / step) * step), 2)


def runner_odds(race: SimRace, runner: SimRunner, now: dt.datetime) -> dict[str, float]:
    win = runner.base_win * race.price_factor(runner, now)
    pool_bias = 0.88 + (int(runner.entrant_id[:4], 16) % 25) / 100  # the tote and fixed prices disagree a little
    return {
        "fixed_win": _tick(win),
        "fixed_place": _tick(1 + (win - 1) / 3.6),
        "pool_win": round(win * pool_bias, 1),
        "pool_place": round(1 + (win * pool_bias - 1) / 3.4, 1),
    }


def race_summary(meeting: SimMeeting, race: SimRace, now: dt.datetime, life: Lifecycle) -> dict[str, Any]:
    start = race.advertised_start(now)
    return {
        "id": race.race_id, "race_number": race.number, "name": race.name, "start_time": iso_z(start),
        "tote_start_time": start.astimezone(ZoneInfo(meeting.timezone)).strftime("%H:%M:%S"),
        "track_condition": meeting.track_condition, "distance": race.distance, "weather": race.weather,
        "country": meeting.country, "state": meeting.state,
        "status": race.status(now, life.interim_after, life.final_after),
    }


def meeting_json(meeting: SimMeeting, now: dt.datetime, life: Lifecycle) -> dict[str, Any]:
    races = [race_summary(meeting, race, now, life) for race in meeting.races]
    done = all(status_is(r["status"], FINAL, ABANDONED, INTERIM, CLOSED) for r in races)
    return {
        "meeting": meeting.meeting_id, "name": meeting.name, "date": f"{meeting.date.isoformat()}T00:00:00Z",
        "track_condition": meeting.track_condition, "category": meeting.category,
        "category_name": CATEGORY_NAMES[meeting.category], "country": meeting.country, "state": meeting.state,
        "tote_raceday_date": meeting.date.isoformat(), "tote_status": "Closed" if done else "Open",
        "races": races,
    }


def _runner_json(race: SimRace, runner: SimRunner, now: dt.datetime) -> dict[str, Any]:
    scratched = runner.scratched(now)
    body: dict[str, Any] = {
        "entrant_id": runner.entrant_id, "market_name": "Final Field", "primary_market": True, "name": runner.name,
        "is_scratched": scratched, "is_late_scratched": scratched and runner.late_scratch, "is_emergency": False,
        "barrier": runner.barrier, "runner_number": runner.number, "jockey": runner.jockey,
        "trainer_name": runner.trainer, "scratch_time": int(runner.scratched_at.timestamp()) if scratched else 0,
        "weight": {"allocated": "57.0", "total": "57.0"}, "favourite": False, "mover": False,
    }
    if not scratched:  # scratched runners carry no prices
        body["odds"] = runner_odds(race, runner, now)
    return body


def _results(race: SimRace) -> list[dict[str, Any]]:
    names = {r.number: r for r in race.runners}
    rows, behind = [], 0.0
    for position, number in enumerate(race.finish_order, start=1):
        behind += race.margins[position - 1] if position > 1 else 0.0
        runner = names[number]
        rows.append({"position": position, "name": runner.name, "barrier": runner.barrier, "runner_number": number,
                     "margin_length": round(behind, 1), "entrant_id": runner.entrant_id})
    if rows:
        rows[0]["winning_time"] = rows[0]["time_ran"] = round(race.distance / 16.5, 2)
    return rows


def _dividends(race: SimRace, status: str) -> list[dict[str, Any]]:
    jump = race.jump() - dt.timedelta(seconds=1)
    prices = {r.number: runner_odds(race, r, jump)["pool_win"] for r in race.runners}
    order = race.finish_order
    places = 3 if len(order) >= 8 else 2 if len(order) >= 5 else 0
    legs: list[tuple[str, tuple[int, ...], float]] = [("Pool Win", order[:1], prices[order[0]])]
    legs += [("Pool Place", (n,), 1 + (prices[n] - 1) / 3.4) for n in order[:places]]
    if len(order) >= 2:
        legs.append(("Pool Quinella", order[:2], prices[order[0]] * prices[order[1]] / 2))
    if len(order) >= 3:
        legs.append(("Pool Trifecta", order[:3], prices[order[0]] * prices[order[1]] * prices[order[2]] / 3))
    if len(order) >= 4:
        first4 = prices[order[0]] * prices[order[1]] * prices[order[2]] * prices[order[3]]
        legs.append(("Pool First4", order[:4], first4 / 6))
    rows = []
    for product, numbers, value in legs:
        key = f"{race.race_id}:{product}:{status}:{':'.join(map(str, numbers))}"
        positions = [{"runner_number": n, "position": order.index(n) + 1} for n in numbers]
        rows.append({
            "id": str(uuid.uuid5(_DIVIDEND_NS, key)), "tote": "NZ", "product_name": product, "status": status,
            "dividend": round(max(value, 1.1), 1), "pool_size": round(1500 + value * 40, 2), "jackpot_size": 0,
            "positions": positions, "description": ":".join(map(str, numbers)),
        })
    return rows


def event_data(meeting: SimMeeting, race: SimRace, now: dt.datetime, life: Lifecycle) -> dict[str, Any]:
    status = race.status(now, life.interim_after, life.final_after)
    start = race.advertised_start(now)
    run = status_is(status, CLOSED, INTERIM, FINAL)
    actual = race.jump() + race.jump_jitter if run else None
    starters = [r for r in race.runners if not r.scratched(now)]
    body: dict[str, Any] = {
        "event_id": race.race_id, "meeting_name": meeting.name, "display_meeting_name": meeting.name,
        "meeting_id": meeting.meeting_id, "status": status, "description": race.name,
        "advertised_start": int(start.timestamp()), "actual_start": int(actual.timestamp()) if actual else 0,
        "advertised_start_string": go_time(start), "race_date_nz": start.astimezone(NZ_TZ).date().isoformat(),
        "start_time_nz": start.astimezone(NZ_TZ).strftime("%H:%M:%S %Z"), "race_number": race.number,
        "type": meeting.category, "country": meeting.country, "state": meeting.state, "distance": race.distance,
        "weather": race.weather, "track_condition": meeting.track_condition, "entrant_count": len(race.runners),
        "field_size": len(starters), "positions_paid": 3 if len(starters) >= 8 else 2,
        "start_type": "Mobile" if meeting.category == "H" else "", "gait": "Pace" if meeting.category == "H" else "",
    }
    if actual:
        body["actual_start_string"] = go_time(actual)
    data: dict[str, Any] = {
        "race": body, "runners": [_runner_json(race, r, now) for r in race.runners], "substitutions": [],
        "derivatives": [], "money_tracker": None, "big_bets": None, "live_bets": None, "error": "",
        "tote_pools": [{"product_type": p, "status": "OPEN" if status_is(status, OPEN) else "CLOSED",
                        "is_final": status_is(status, FINAL)} for p in ("Win", "Place")],
    }
    # Results and dividends are omitted until the race has a provisional result, as the real API does.
    if status_is(status, INTERIM, FINAL):
        data["results"] = _results(race)
        data["dividends"] = _dividends(race, INTERIM)
        if status_is(status, FINAL):
            data["dividends"] += _dividends(race, FINAL)
    return data
