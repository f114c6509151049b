"""Debian's Chromium driven by Playwright for the UI tests (never a downloaded browser)."""

from __future__ import annotations

import os
import shutil
from collections.abc import Callable
from pathlib import Path

import httpx
import pytest

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
# Background networking off: this machine's closed network refuses Chromium's own connections, many at a time.
CHROMIUM_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-background-networking", "--disable-component-update",
                 "--disable-sync", "--no-first-run", "--disable-quic"]

needs_chromium = pytest.mark.skipif(CHROMIUM is None and os.environ.get("CI") != "true",
                                    reason="no Chromium on this machine (CI installs Debian's chromium package)")


def launch(playwright):
    """A headless Chromium; under CI=true a missing binary fails instead of skipping (see needs_chromium)."""
    assert CHROMIUM, "CI=true but no chromium binary: make test must install Debian's chromium package"
    return playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)


# A container starting on this host adds a network interface, and Chromium then aborts the loads in flight with this
# error (seen while a compose deployment started beside the live stack's browser test). The page is loaded again, as a
# person would reload it; any other error fails at once.
NETWORK_CHANGED = "net::ERR_NETWORK_CHANGED"
GOTO_ATTEMPTS = 3


def goto(page, url: str, attempts: int = GOTO_ATTEMPTS):
    """`page.goto(url)` until the network stays idle, loaded again when the host's network changed under it."""
    from playwright.sync_api import Error

    for attempt in range(1, attempts + 1):
        try:
            return page.goto(url, wait_until="networkidle")
        except Error as error:
            if NETWORK_CHANGED not in str(error) or attempt == attempts:
                raise


# A page's loads before its failure counts: the second load of a page whose first queries went unanswered.
SHOW_LOADS = 2


def load_showing(page, url: str, shows: Callable[[], None], screenshot: Path, loads: int = SHOW_LOADS) -> None:
    """Load `url` until `shows` (waits for what the page must show) passes, then leave `screenshot` of it. Beside the
    rest of the suite on 2 cores the Dagster UI has left a page without its content past a minute's wait, its first
    queries unanswered (load ~20-30); an operator reloads then, and so does this, up to `loads` loads in all. Each load
    whose wait timed out leaves a screenshot of what the page showed instead (`screenshot` with "-failed-load-N"
    added); the last one's timeout is raised. Anything but a timeout (an assertion, a browser error) fails at once."""
    from playwright.sync_api import TimeoutError as PageTimeout

    for load in range(1, loads + 1):
        goto(page, url)
        try:
            shows()
            page.screenshot(path=str(screenshot))
            return
        except PageTimeout:
            page.screenshot(path=str(screenshot.with_name(f"{screenshot.stem}-failed-load-{load}{screenshot.suffix}")))
            if load == loads:
                raise


def dismiss_onboarding(dagster_url: str) -> None:
    """A fresh Dagster instance opens a "Join the Dagster community" modal (on 127.0.0.1 and localhost) some time after
    the first page loads, over whatever the test clicks next: waiting 15 s for it to skip it was not enough on a loaded
    host (the modal's backdrop took the click on "View tags and config" for 30 s). The instance is told the
    modal was seen, by the mutation its Skip button sends, so it never opens."""
    answer = httpx.post(f"{dagster_url}/graphql", json={"query": "mutation { setNuxSeen }"}, timeout=120)
    assert answer.status_code == 200 and answer.json() == {"data": {"setNuxSeen": True}}, answer.text
