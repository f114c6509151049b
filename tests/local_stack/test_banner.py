"""What `make run` prints once the stack is up: the addresses, and whom the stack is for (it has no front)."""

import pytest

from local_stack.__main__ import banner

pytestmark = pytest.mark.unit


@pytest.mark.parametrize("api_url", [None, "http://127.0.0.1:8090"])
def test_the_banner_names_the_addresses_and_says_the_stack_is_for_one_trusted_user(api_url) -> None:
    text = banner("http://127.0.0.1:3000", "http://127.0.0.1:8765/affiliates/v1/racing", "/x/exports", api_url)
    assert "Dagster UI      http://127.0.0.1:3000" in text and "/x/exports" in text
    assert ("Control API     http://127.0.0.1:8090/docs" in text) == (api_url is not None)
    assert "one trusted user on this machine" in text and "no login" in text and "a web page" in text
    assert text.rstrip().endswith("Press Ctrl-C to stop everything.")
    assert "`source .local/env`" in text  # the one line a second terminal needs for the CLIs


@pytest.mark.parametrize(("path", "shown"), [("/repo/.local/env", ".local/env"), ("/tmp/x/env", "/tmp/x/env")])
def test_the_env_file_is_shown_relative_to_the_repository_when_inside_it(path, shown) -> None:
    from pathlib import Path

    from local_stack.__main__ import shown_path

    assert shown_path(Path(path), Path("/repo")) == shown
