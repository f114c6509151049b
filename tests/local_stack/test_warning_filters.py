"""The warning filters `make run` gives `dagster dev` (local_stack/stack.py): the user's own first, each naming one
message. What the console shows over a whole session is read in tests/e2e/test_live_stack.py."""

from __future__ import annotations

import pytest

from local_stack.stack import DAGSTER_DEV_WARNING_FILTERS, dagster_dev_warnings


@pytest.mark.unit
@pytest.mark.parametrize(("users", "expected"), [
    (None, ",".join(DAGSTER_DEV_WARNING_FILTERS)),
    ("", ",".join(DAGSTER_DEV_WARNING_FILTERS)),
    ("error::DeprecationWarning", "error::DeprecationWarning," + ",".join(DAGSTER_DEV_WARNING_FILTERS)),
])
def test_the_users_own_warning_filters_come_first(users: str | None, expected: str) -> None:
    environ = {} if users is None else {"PYTHONWARNINGS": users}
    assert dagster_dev_warnings(environ) == expected


@pytest.mark.unit
def test_the_filter_names_one_message_never_all_warnings() -> None:
    for entry in DAGSTER_DEV_WARNING_FILTERS:
        action, message, *rest = entry.split(":")
        assert action == "ignore" and len(message) > 20
