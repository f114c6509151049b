"""Text from a TAB response made safe to show: errors quoting it reach run tags (`racing/error`), the `scrapes` audit,
ledger notes, alerts and `racing` CLI output.

Every character of orchestration_core/unshowable.py's class (controls, separators, bidi formatting, invisible
characters, lone surrogates) is replaced by a visible escape (`\\x1b`, `\\u202e`), so the reader sees that it was
there; task labels refuse the same class (maintenance_jobs/text_rules.py).
"""

from __future__ import annotations

import re

from orchestration_core.unshowable import UNSHOWABLE

# Long enough for an error and the problems of its earlier attempts; a run tag keeps 500 characters of it.
DEFAULT_LIMIT = 500


def visible_escape(character: str) -> str:
    """One character as Python's numeric escape: `\\x1b` below U+0100, `\\u202e` in the Basic Multilingual Plane,
    `\\U000e0001` past it, so `\\ue0000` cannot read as U+E000 followed by a "0" (`ascii()` writes the same, but
    `\\n`, `\\t` and `\\r` for those three)."""
    code = ord(character)
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}" if code < 0x10000 else f"\\U{code:08x}"


def _escape(match: re.Match[str]) -> str:
    return visible_escape(match.group())


def showable(text: object, limit: int = DEFAULT_LIMIT) -> str:
    """`text` as one line with every control, separator, bidi, invisible and surrogate character escaped visibly, cut to
    `limit` characters (the last one then `…`)."""
    raw = str(text)
    raw = raw[: limit + 1]  # an escape is never shorter than its character: the cut below still says so
    shown = UNSHOWABLE.sub(_escape, raw)
    return shown if len(shown) <= limit else shown[: limit - 1] + "…"
