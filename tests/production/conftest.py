"""The compose deployments' teardowns left running in the background (compose_stack.in_background) end with the
session at the latest: none outlives pytest half done."""

from tests.production.compose_stack import join_background


def pytest_sessionfinish() -> None:
    join_background()
