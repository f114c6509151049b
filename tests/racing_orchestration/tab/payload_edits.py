"""Edits of a TAB payload for the hostile-value tests: a copy with one value replaced by a dotted path."""

from __future__ import annotations

import copy
from typing import Any


def with_value(payload: dict, path: str, value: Any) -> dict:
    """A deep copy of `payload` with the value at `path` ("data.meetings.5.races.0.race_number") replaced."""
    payload = copy.deepcopy(payload)
    *parents, last = path.split(".")
    node: Any = payload
    for key in parents:
        node = node[int(key)] if isinstance(node, list) else node[key]
    node[int(last) if isinstance(node, list) else last] = value
    return payload
