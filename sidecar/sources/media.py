"""The Content-Type a push endpoint reads: parsed once, refused with a counted 415 naming the accepted types."""

from __future__ import annotations

from collections.abc import Collection
from typing import Any

import orjson
from fastapi import HTTPException, Request

__all__ = ["JSON", "JSON_LINES", "decode_documents", "media_type"]

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


def decode_documents(body: bytes, mtype: str, *, wrapper: str, max_docs: int, what: str) -> list[Any]:
    """The JSON documents of a push body: one per line for the JSON Lines types (json-seq's RS prefix dropped;
    reading stops one past ``max_docs``, so the caller can refuse an over-long body without decoding all of it),
    else one JSON value: an object, a list of them, or ``{wrapper: [...]}``. Raises ``ValueError`` naming the
    line or the shape; ``what`` names one document in that message."""
    if mtype in JSON_LINES:
        docs: list[Any] = []
        for n, raw in enumerate(body.splitlines(), 1):
            line = raw.strip().lstrip(b"\x1e")  # json-seq: each record starts with RS
            if line.strip():
                try:
                    docs.append(orjson.loads(line))
                except orjson.JSONDecodeError as exc:
                    raise ValueError(f"line {n} is not JSON: {exc}") from None
            if len(docs) > max_docs:
                break
        return docs
    try:
        doc = orjson.loads(body)
    except orjson.JSONDecodeError as exc:
        raise ValueError(f"body is not JSON: {exc}") from None
    if isinstance(doc, dict) and set(doc) == {wrapper}:
        doc = doc[wrapper]
    if isinstance(doc, dict):
        return [doc]
    if not isinstance(doc, list):
        raise ValueError(f'body must be {what}, a list of them or {{"{wrapper}": [...]}}')
    return doc
