"""Pure logic of the morning scrape: which (category, country, date) combinations to fetch and how a run ended."""

from __future__ import annotations

import datetime as dt
from collections.abc import Sequence
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
