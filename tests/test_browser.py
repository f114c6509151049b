"""The UI tests' page loads: a load the host's network change aborted is done again, any other failure is not; a page
that did not show its content in time is loaded once more, with a screenshot of what it showed."""

from __future__ import annotations

from pathlib import Path

import pytest
from playwright.sync_api import Error
from playwright.sync_api import TimeoutError as PageTimeout

from tests.browser import GOTO_ATTEMPTS, NETWORK_CHANGED, SHOW_LOADS, goto, load_showing

pytestmark = pytest.mark.unit

URL = "http://127.0.0.1:3000/runs"


class Page:
    """Answers each goto with the next of `outcomes`: an Error to raise, else the response to return."""

    def __init__(self, *outcomes) -> None:
        self.outcomes, self.loads, self.screenshots = list(outcomes), [], []

    def screenshot(self, path: str) -> None:
        self.screenshots.append(Path(path).name)

    def goto(self, url: str, wait_until: str):
        self.loads.append((url, wait_until))
        outcome = self.outcomes.pop(0)
        if isinstance(outcome, Error):
            raise outcome
        return outcome


def changed() -> Error:
    return Error(f"Page.goto: {NETWORK_CHANGED} at {URL}")


@pytest.mark.parametrize("failed_loads", [0, 1, GOTO_ATTEMPTS - 1])
def test_a_load_the_network_change_aborted_is_done_again(failed_loads: int) -> None:
    page = Page(*[changed()] * failed_loads, "response")
    assert goto(page, URL) == "response"
    assert page.loads == [(URL, "networkidle")] * (failed_loads + 1)


def test_the_last_attempt_fails_with_the_browsers_error() -> None:
    page = Page(*[changed()] * GOTO_ATTEMPTS, "never reached")
    with pytest.raises(Error, match="ERR_NETWORK_CHANGED"):
        goto(page, URL)
    assert len(page.loads) == GOTO_ATTEMPTS


def test_any_other_error_fails_at_once() -> None:
    page = Page(Error(f"Page.goto: net::ERR_CONNECTION_REFUSED at {URL}"), "never reached")
    with pytest.raises(Error, match="ERR_CONNECTION_REFUSED"):
        goto(page, URL)
    assert len(page.loads) == 1


class Shows:
    """What the page shows on each load: the next of `outcomes` raised by the wait, or None when the content showed."""

    def __init__(self, *outcomes) -> None:
        self.outcomes, self.waits = list(outcomes), 0

    def __call__(self) -> None:
        self.waits += 1
        outcome = self.outcomes.pop(0)
        if outcome is not None:
            raise outcome


SHOT = Path("/artifacts/race-cards.png")


# No miss, and every load but the last missed (SHOW_LOADS is 2: one miss); a miss on the last load is raised (below).
# The page that showed is left in the screenshot the caller named.
@pytest.mark.parametrize(("timeouts", "screenshots"), [
    (0, ["race-cards.png"]),
    (1, ["race-cards-failed-load-1.png", "race-cards.png"]),
])
def test_a_page_that_did_not_show_in_time_is_loaded_again_with_a_screenshot_of_each_miss(
        timeouts: int, screenshots: list[str]) -> None:
    page = Page(*["response"] * (timeouts + 1))
    shows = Shows(*[PageTimeout("Timeout 60000ms exceeded")] * timeouts, None)
    load_showing(page, URL, shows, SHOT)
    assert page.loads == [(URL, "networkidle")] * (timeouts + 1)
    assert shows.waits == timeouts + 1
    assert page.screenshots == screenshots


def test_the_last_loads_timeout_is_raised_after_its_screenshot() -> None:
    page = Page(*["response"] * SHOW_LOADS)
    with pytest.raises(PageTimeout, match="60000ms"):
        load_showing(page, URL, Shows(*[PageTimeout("Timeout 60000ms exceeded")] * SHOW_LOADS), SHOT)
    assert len(page.loads) == SHOW_LOADS == 2
    assert page.screenshots == ["race-cards-failed-load-1.png", "race-cards-failed-load-2.png"]


def test_a_failure_other_than_a_timeout_is_not_loaded_again() -> None:
    page = Page("response", "never reached")
    with pytest.raises(AssertionError, match="wrong day"):
        load_showing(page, URL, Shows(AssertionError("wrong day"), None), SHOT)
    assert len(page.loads) == 1 and page.screenshots == []
