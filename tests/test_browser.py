"""The UI tests' page loads: a load the host's network change aborted is done again, any other failure is not."""

from __future__ import annotations

import pytest
from playwright.sync_api import Error

from tests.browser import GOTO_ATTEMPTS, NETWORK_CHANGED, goto

pytestmark = pytest.mark.unit

URL = "http://127.0.0.1:3000/runs"


class Page:
    """Answers each goto with the next of `outcomes`: an Error to raise, else the response to return."""

    def __init__(self, *outcomes) -> None:
        self.outcomes, self.loads = list(outcomes), []

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
