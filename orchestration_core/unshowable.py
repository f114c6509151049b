"""The characters no text from outside (a TAB response, a task's label) may carry to where people read it: run tags,
the UI, alerts, the `scrapes` audit, terminals.

- C0 and C1 controls and DEL: terminal escapes, bells, line breaks;
- U+2028/U+2029, the line and paragraph separators;
- the bidirectional formatting characters (embeddings, overrides, isolates, marks), which reorder what a terminal or
  browser shows (`exe.txt` read as `txt.exe`);
- invisible characters, which make two texts that look the same differ and can carry hidden text: the zero-width
  space and joiners, the word joiner and invisible operators (U+200B-U+200D, U+2060-U+2064), the byte order mark
  (U+FEFF) and the tag characters (U+E0000-U+E007F, which spell ASCII invisibly);
- lone surrogates, which are not UTF-8: neither Postgres nor a terminal can take them.

TAB text is shown with each of them escaped (racing_orchestration/tab/showable.py); a task label holding one is
refused (maintenance_jobs/text_rules.py). One class for both, so what one side shows the other cannot hide.
"""

from __future__ import annotations

import re

UNSHOWABLE = re.compile(
    "[\x00-\x1f\x7f-\x9f"  # C0, DEL, C1
    "\u2028\u2029"  # line and paragraph separators
    "\u202a-\u202e\u2066-\u2069\u200e\u200f\u061c"  # bidi embeddings, overrides, isolates, marks
    "\u200b-\u200d\u2060-\u2064\ufeff\U000e0000-\U000e007f"  # invisible
    "\ud800-\udfff]"  # lone surrogates
)
