"""What text a task may hold where it is shown: names and labels reach run tags, the UI and CLI tables.

Every character of orchestration_core/unshowable.py's class is refused: controls (C0, DEL, C1), line and paragraph
separators, the bidirectional formatting characters, invisible characters (`ops` and `o<U+200B>ps` would look the
same and filter differently) and lone surrogates (which Postgres cannot store). TAB text shows the same class escaped
(racing_orchestration/tab/showable.py).
"""

from __future__ import annotations

import re

from orchestration_core.unshowable import UNSHOWABLE


def unshowable_character(value: str) -> str | None:
    """The first control, bidi formatting or invisible character of `value` as `U+XXXX`, or None."""
    found = UNSHOWABLE.search(value)
    return f"U+{ord(found.group()):04X}" if found else None


def check_label(value: str) -> str:
    """`value`, or ValueError naming the first control, bidi formatting or invisible character in it."""
    bad = unshowable_character(value)
    if bad is not None:
        raise ValueError(f"must not contain control, bidirectional formatting or invisible characters (found {bad})")
    return value


def nesting_depth_over(value: object, limit: int) -> bool:
    """True when `value` (dicts and lists, as JSON) nests deeper than `limit`; iterative, so no depth can make it
    recurse, and it stops at the first container past the limit."""
    stack: list[tuple[object, int]] = [(value, 1)]
    while stack:
        item, depth = stack.pop()
        if isinstance(item, dict | list | tuple):
            if depth > limit:
                return True
            children = item.values() if isinstance(item, dict) else item
            stack.extend((child, depth + 1) for child in children if isinstance(child, dict | list | tuple))
    return False


_JSON_TOKEN = re.compile(rb'"(?:[^"\\]|\\.)*"|[\[\]{}]')


def json_nesting_over(body: bytes, limit: int) -> bool:
    """True when the JSON text `body` opens more than `limit` arrays/objects at once; a scan of the raw bytes (strings
    skipped), so it runs before any parser could recurse, and stops as soon as the limit is passed."""
    depth = 0
    for token in _JSON_TOKEN.finditer(body):
        symbol = token.group()
        if symbol in (b"[", b"{"):
            depth += 1
            if depth > limit:
                return True
        elif symbol in (b"]", b"}"):
            depth -= 1
    return False
