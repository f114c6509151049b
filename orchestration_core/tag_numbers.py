"""Numbers read back from run tags, which whoever launches a run chooses (the webserver takes any tags): one rule for
every reader, so a tag of 400 digits, `" 7"`, `"1_000"` or another script's digits never breaks a view or a CLI table.
"""

from __future__ import annotations

import re

# The bounds every reader clamps to: far above any real value, exact as a float and in a Postgres integer column (a
# task allows at most 10 retries, Dagster's run retries a few; a run processes far fewer items).
MAX_RETRY_NUMBER = 1_000_000
MAX_ITEM_COUNT = 1_000_000_000  # per run; a day of runs summed stays exact as a float (< 2**53)

# The sign, and the digits after any leading zeros (at least one: "000" is "0").
_INTEGER = re.compile(r"([+-]?)0*([0-9]+)")
_EXACT_DIGITS = 15  # more digits than this are clamped without converting them


def clamped_int(value: str | None, low: int, high: int) -> int | None:
    """`value` as an integer clamped into [low, high]; None unless it is ASCII digits with an optional sign."""
    match = _INTEGER.fullmatch(value) if isinstance(value, str) else None
    if match is None:
        return None
    sign, digits = match.groups()
    if len(digits) > _EXACT_DIGITS:
        return low if sign == "-" else high
    return min(max(int(value), low), high)
