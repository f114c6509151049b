"""Text from a TAB response made safe to show: errors quoting it reach run tags (`racing/error`), the `scrapes` audit,
ledger notes, alerts and `racing` CLI output.

Control characters (C0, DEL, C1: terminal escapes, bells, line breaks), the line and paragraph separators, the
bidirectional formatting characters (which reorder what a terminal or browser shows) and lone surrogates (not UTF-8:
neither Postgres nor a terminal can take them) are replaced by a visible escape (`\\x1b`, `\\u202e`), so the reader
sees that they were there; the same classes `maintenance_jobs/text_rules.py` refuses in labels.
"""

from __future__ import annotations

import re

# C0 and C1 controls, DEL, U+2028/U+2029, the bidi embeddings, overrides, isolates and marks, and lone surrogates.
_UNSHOWABLE = re.compile("[\x00-\x1f\x7f-\x9f\u2028\u2029\u202a-\u202e\u2066-\u2069\u200e\u200f\u061c\ud800-\udfff]")
# Long enough for an error and the problems of its earlier attempts; a run tag keeps 500 characters of it.
DEFAULT_LIMIT = 500


def _escape(match: re.Match[str]) -> str:
    code = ord(match.group())
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


def showable(text: object, limit: int = DEFAULT_LIMIT) -> str:
    """`text` as one line with every control, separator, bidi and surrogate character escaped visibly, cut to
    `limit` characters (the last one then `…`)."""
    raw = str(text)
    raw = raw[: limit + 1]  # an escape is never shorter than its character: the cut below still says so
    shown = _UNSHOWABLE.sub(_escape, raw)
    return shown if len(shown) <= limit else shown[: limit - 1] + "…"
