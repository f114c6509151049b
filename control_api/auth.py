"""API-key authentication: `Authorization: Bearer <key>` on every path outside the public list.

A plain ASGI middleware rather than a route dependency, so it also covers routes FastAPI adds itself (docs) and
unknown paths (answered 401 before routing, which does not reveal which paths exist).
"""

from __future__ import annotations

import hmac
import json
from typing import Any

from starlette.types import ASGIApp, Receive, Scope, Send

BEARER_SCHEME = "bearer"


def check_authorization(header: str | None, api_key: str) -> int | None:
    """None when `header` carries the key; 401 when it is missing or not a bearer token; 403 when the key is wrong."""
    if not header:
        return 401
    scheme, _, token = header.partition(" ")
    if scheme.lower() != BEARER_SCHEME or not token.strip():
        return 401
    # Constant time: the comparison does not reveal how much of a guess was right.
    if not hmac.compare_digest(token.strip().encode(), api_key.encode()):
        return 403
    return None


_MESSAGES = {
    401: "missing API key: send 'Authorization: Bearer <key>'",
    403: "invalid API key",
}


class ApiKeyMiddleware:
    def __init__(self, app: ASGIApp, api_key: str | None, public_paths: frozenset[str]) -> None:
        self.app = app
        self.api_key = api_key
        self.public_paths = public_paths

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or self.api_key is None or scope["path"] in self.public_paths:
            await self.app(scope, receive, send)
            return
        header = _header(scope, b"authorization")
        status = check_authorization(header, self.api_key)
        if status is None:
            await self.app(scope, receive, send)
            return
        body = json.dumps({"detail": _MESSAGES[status]}).encode()
        headers = [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]
        if status == 401:
            headers.append((b"www-authenticate", b"Bearer"))
        await send({"type": "http.response.start", "status": status, "headers": headers})
        await send({"type": "http.response.body", "body": body})


def _header(scope: Scope, name: bytes) -> str | None:
    for key, value in scope.get("headers", []):
        if key.lower() == name:
            return value.decode("latin-1")
    return None


def add_security_scheme(schema: dict[str, Any], public_paths: frozenset[str]) -> dict[str, Any]:
    """Declare the bearer scheme in the OpenAPI document and require it on every non-public operation."""
    schema.setdefault("components", {}).setdefault("securitySchemes", {})["apiKey"] = {
        "type": "http",
        "scheme": BEARER_SCHEME,
        "description": "the SCHEDULER_API_KEY",
    }
    for path, operations in schema.get("paths", {}).items():
        if path in public_paths:
            continue
        for operation in operations.values():
            if isinstance(operation, dict):
                operation["security"] = [{"apiKey": []}]
                operation.setdefault("responses", {}).update(
                    {"401": {"description": _MESSAGES[401]}, "403": {"description": _MESSAGES[403]}}
                )
    return schema
