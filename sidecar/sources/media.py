"""The Content-Type a push endpoint reads: parsed once, refused with a counted 415 naming the accepted types."""

from __future__ import annotations

from collections.abc import Collection
from typing import Any

from fastapi import HTTPException, Request

__all__ = ["JSON", "JSON_LINES", "media_type"]

JSON = ("application/json",)
# JSON Lines under its common names; RFC 7464 json-seq records (RS-prefixed) are read the same way.
JSON_LINES = (
    "application/x-ndjson",
    "application/ndjson",
    "application/jsonl",
    "application/x-jsonlines",
    "application/json-seq",
)


def media_type(request: Request, accepted: Collection[str], guard: Any, endpoint: str) -> str:
    """The request's media type (lower case, parameters dropped), one of ``accepted`` or a ``+json`` type
    (read as JSON); none at all is read as JSON, the common case of clients that send none. Anything else
    raises the guard's counted 415."""
    raw = request.headers.get("content-type")
    if raw is None or not raw.strip():
        return "application/json"
    mtype = raw.split(";", 1)[0].strip().lower()
    if mtype in accepted:
        return mtype
    top, _, sub = mtype.partition("/")
    if top == "application" and sub.endswith("+json") and "application/json" in accepted:
        return "application/json"
    names = ", ".join(accepted)
    exc: HTTPException = guard.refuse(
        endpoint,
        "unsupported_media_type",
        415,
        f"unsupported Content-Type {raw.strip()[:100]!r}; send one of: {names} (or application/*+json)",
        {"Accept-Post": names},
    )
    raise exc
