"""Pure logic of the morning scrape: which (category, country, date) combinations to fetch and how a run ended."""

from __future__ import annotations

import datetime as dt
from collections.abc import Sequence
from dataclasses import dataclass
from typing import NamedTuple
from zoneinfo import ZoneInfo

from orchestration_core.run_outcome import Outcome, classify_outcome

DEFAULT_CATEGORIES = ("T", "H", "G")
DEFAULT_COUNTRIES = ("NZ", "AUS")


class ScrapeCombination(NamedTuple):
    category: str
    country: str
    day: dt.date

    @property
    def key(self) -> str:
        """Mapping key of the combination's step (letters, digits and underscores only)."""
        return f"{self.category}_{self.country}_{self.day:%Y%m%d}"


class CombinationResult(NamedTuple):
    combination: ScrapeCombination
    status: str  # "ok", "empty" (no racing that day, still empty after its retries: not a failure) or "failed"
    meetings: int = 0
    races: int = 0
    api_requests: int = 0
    attempts: int = 1
    error: str | None = None
    http_status: int | None = None  # a failed combination's last HTTP status (None: no answer or a bad payload)


def scrape_days(now: dt.datetime, timezone: str, days_ahead: int = 1) -> list[dt.date]:
    """Today and the following `days_ahead` days in the racing timezone."""
    today = now.astimezone(ZoneInfo(timezone)).date()
    return [today + dt.timedelta(days=offset) for offset in range(days_ahead + 1)]


def retries_when_empty(day: dt.date, now: dt.datetime, timezone: str) -> bool:
    """Whether a combination of `day` that came back empty is tried again (30 min later, like a failed one).

    Only today's: TAB publishes a day's fields on the morning itself, so an empty card at 06:00 may fill by 06:30.
    Tomorrow's is normally empty at 06:00 and costs nothing to miss now: tomorrow's 06:00 scrape (with its own retries)
    and the day's card refreshes fetch it as "today". A past day's empty card (a backfill) will not fill either.
    """
    return day == now.astimezone(ZoneInfo(timezone)).date()


def retries_after_error(day: dt.date, now: dt.datetime, timezone: str, transient: bool) -> bool:
    """Whether a combination whose fetch failed is tried again (30 min later, while retries last).

    Transient errors (5xx, 429, timeouts, malformed payloads) always are: TAB may be back by then. A 4xx answer (e.g.
    404) for a day before today will not change: a backfill of days TAB no longer serves ends at once with the
    reason, not after 90 minutes of retries. Today's and tomorrow's 4xx are retried as before.
    """
    return transient or day >= now.astimezone(ZoneInfo(timezone)).date()


def plan_combinations(
    categories: Sequence[str], countries: Sequence[str], days: Sequence[dt.date]
) -> list[ScrapeCombination]:
    """Every (category, country, day) once, in a stable order; rejects empty or unknown categories."""
    bad = [c for c in categories if c.upper() not in DEFAULT_CATEGORIES]
    if bad:
        raise ValueError(f"categories: unknown category {bad}; expected some of {list(DEFAULT_CATEGORIES)}")
    if not categories or not countries or not days:
        raise ValueError("categories, countries and dates must each name at least one value")
    seen: dict[ScrapeCombination, None] = {}
    for day in days:
        for category in categories:
            for country in countries:
                seen[ScrapeCombination(category.upper(), country.upper(), day)] = None
    return list(seen)


def parse_days(values: Sequence[str]) -> list[dt.date]:
    """ISO dates from config, with an error that names the bad value."""
    days = []
    for value in values:
        try:
            days.append(dt.date.fromisoformat(value))
        except ValueError:
            raise ValueError(f"dates: {value!r} is not a YYYY-MM-DD date") from None
    return days


class ScrapeSummary(NamedTuple):
    outcome: Outcome
    combinations: int
    ok: int
    empty: int
    failed: int
    meetings: int
    races: int
    api_requests: int


def summarize(results: Sequence[CombinationResult]) -> ScrapeSummary:
    """Outcome of a scrape: success, partial (some combinations failed for good) or failed (all did)."""
    failed = sum(r.status == "failed" for r in results)
    processed = len(results) - failed
    return ScrapeSummary(
        outcome=classify_outcome(processed, failed) if results else Outcome.FAILED,
        combinations=len(results),
        ok=sum(r.status == "ok" for r in results),
        empty=sum(r.status == "empty" for r in results),
        failed=failed,
        meetings=sum(r.meetings for r in results),
        races=sum(r.races for r in results),
        api_requests=sum(r.api_requests for r in results),
    )


def results_markdown(results: Sequence[CombinationResult]) -> str:
    """A Markdown table of the combinations, for the run's metadata in the UI."""
    lines = ["| category | country | date | status | meetings | races | requests | attempts | error |",
             "|---|---|---|---|---|---|---|---|---|"]
    for r in sorted(results, key=lambda r: r.combination):
        c = r.combination
        error = (r.error or "").replace("|", "/")[:120]
        lines.append(f"| {c.category} | {c.country} | {c.day} | {r.status} | {r.meetings} | {r.races} "
                     f"| {r.api_requests} | {r.attempts} | {error} |")
    return "\n".join(lines)


@dataclass(frozen=True)
class DayOutcome:
    """What a scrape stored for one racing day, over all its (category, country) combinations."""

    day: dt.date
    combinations: int
    ok: int
    empty: int
    failed: int
    meetings: int
    races: int
    api_requests: int
    errors: tuple[str, ...] = ()
    gone: bool = False  # every failed combination was answered with a 4xx (TAB refuses the day)

    @property
    def stored(self) -> bool:
        return self.meetings > 0

    def reason(self, today: dt.date) -> str | None:
        """Why nothing was stored for the day (None when something was): one line a person can act on."""
        if self.stored:
            return None
        label = "a past day" if self.day < today else "today" if self.day == today else "a day ahead"
        if self.failed:
            first = "; ".join(self.errors[:2])
            if self.gone and self.day < today:
                return (f"{self.day}: TAB no longer serves this day: {self.failed} of {self.combinations} "
                        f"combinations were refused ({first})")
            return f"{self.day}: nothing stored: {self.failed} of {self.combinations} combinations failed ({first})"
        if self.day < today:
            return (f"{self.day}: TAB listed no meetings in any of {self.combinations} combinations ({label}): "
                    "a day TAB no longer serves, or one without racing")
        return f"{self.day}: TAB lists no meetings yet in any of {self.combinations} combinations ({label})"


def day_outcomes(results: Sequence[CombinationResult]) -> list[DayOutcome]:
    """The results grouped by racing day, oldest first."""
    by_day: dict[dt.date, list[CombinationResult]] = {}
    for result in results:
        by_day.setdefault(result.combination.day, []).append(result)
    outcomes = []
    for day in sorted(by_day):
        group = sorted(by_day[day], key=lambda r: r.combination)
        failed = [r for r in group if r.status == "failed"]
        outcomes.append(DayOutcome(
            day=day,
            combinations=len(group),
            ok=sum(r.status == "ok" for r in group),
            empty=sum(r.status == "empty" for r in group),
            failed=len(failed),
            meetings=sum(r.meetings for r in group),
            races=sum(r.races for r in group),
            api_requests=sum(r.api_requests for r in group),
            errors=tuple(dict.fromkeys(f"{r.combination.category}/{r.combination.country}: {r.error}" for r in failed)),
            gone=bool(failed) and all(r.http_status is not None and 400 <= r.http_status < 500 for r in failed),
        ))
    return outcomes
