"""Debian's Chromium driven by Playwright for the UI tests (never a downloaded browser)."""

from __future__ import annotations

import os
import shutil

import pytest

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
# Background networking off: this machine's closed network refuses Chromium's own connections, many at a time.
CHROMIUM_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-background-networking", "--disable-component-update",
                 "--disable-sync", "--no-first-run", "--disable-quic"]

needs_chromium = pytest.mark.skipif(CHROMIUM is None and os.environ.get("CI") != "true",
                                    reason="no Chromium on this machine (CI installs Debian's chromium package)")


def launch(playwright):
    """A headless Chromium; under CI=true a missing binary fails instead of skipping (see needs_chromium)."""
    assert CHROMIUM, "CI=true but no chromium binary: .ci/run must install Debian's chromium package"
    return playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)


def skip_onboarding(page) -> None:
    """A fresh Dagster instance opens a "Join the Dagster community" modal a moment after the first page loads."""
    from playwright.sync_api import TimeoutError as PlaywrightTimeout

    skip = page.get_by_role("button", name="Skip").first
    try:
        skip.wait_for(timeout=15_000)
    except PlaywrightTimeout:
        return
    skip.click()
