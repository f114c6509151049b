"""One combination's scrape: list its meetings, store them and the API calls that fetched them."""

from __future__ import annotations

from racing_orchestration.ingestion.combinations import CombinationResult, ScrapeCombination
from racing_orchestration.race_db.api_calls import recorded_client
from racing_orchestration.race_db.resource import RaceDatabase
from racing_orchestration.race_db.store import record_scrapes, upsert_meetings
from racing_orchestration.tab.client import TabClient
from racing_orchestration.tab.showable import showable


def scrape_combination_once(
    tab_client: TabClient, race_db: RaceDatabase, combination: ScrapeCombination, run_id: str | None
) -> CombinationResult:
    """Fetch and store one combination; API errors propagate after their calls are recorded."""
    with recorded_client(tab_client, race_db, run_id) as client:
        meetings = client.list_meetings(combination.day, combination.category, combination.country)
    with race_db.begin() as conn:
        counts = upsert_meetings(conn, meetings)
        record_scrapes(conn, client.calls, run_id)
    # Meetings or races TAB sent with values the race database cannot store were left out with their reasons (their
    # calls' `scrapes` rows say which); the rest is stored, and the step's result names them.
    refused = [reason for call in client.calls for reason in call.refused]
    note = f"refused {len(refused)} meeting(s)/race(s) that cannot be stored: {'; '.join(refused)}" if refused else None
    return CombinationResult(
        combination=combination,
        status="ok" if meetings else "empty",
        meetings=counts.meetings,
        races=counts.races,
        api_requests=len(client.calls),
        error=showable(note) if note else None,
    )
