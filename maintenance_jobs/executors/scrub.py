"""Keeping secrets out of logs, run metadata and error messages."""

from __future__ import annotations

import re
from collections.abc import Iterable

REDACTED = "***"
# user:password@ in URLs, whatever the secret is.
_URL_USERINFO = re.compile(r"(?P<scheme>[A-Za-z][A-Za-z0-9+.-]*://)[^/@\s]+@")
_AUTH_HEADER = re.compile(r"(?i)(authorization:\s*(?:token|bearer|basic)\s+)\S+")


def scrub(text: str, secrets: Iterable[str | None] = ()) -> str:
    """`text` with every known secret, URL credential and Authorization header value replaced by ***."""
    for secret in secrets:
        if secret:
            text = text.replace(secret, REDACTED)
    text = _URL_USERINFO.sub(lambda m: f"{m.group('scheme')}{REDACTED}@", text)
    return _AUTH_HEADER.sub(lambda m: f"{m.group(1)}{REDACTED}", text)
