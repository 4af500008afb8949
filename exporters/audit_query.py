"""``GET /v1/audit``'s parameters: parsed, bounded and turned into one parameterised SQL query.

Every parameter is checked before any SQL is built, and the SQL text is made only of fixed fragments: values
travel as ``?`` parameters, never in the text, so no parameter can change the statement. Refused with a
message (HTTP 400): what every list API refuses (``sidecar.listparams``: an unknown or repeated parameter, a
limit outside 1..1000, a filter that is not 1 to 200 characters of any Unicode, as events accept), a time
outside 2000..2100 or a range longer than ``MAX_RANGE_SECS``, a cursor this sidecar did not hand out. Pages
are ordered newest first; the cursor is the position after the last row of a page (its time and id), encoded
opaquely, so a page never repeats or skips a row added meanwhile.
"""

from __future__ import annotations

import base64
import binascii
import math
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

import orjson

from sidecar.listparams import ListParamError, check, text
from sidecar.timerange import check_unix_seconds

__all__ = ["MAX_LIMIT", "MAX_RANGE_SECS", "AuditQuery", "QueryError", "decode_cursor", "encode_cursor", "parse"]

MAX_LIMIT = 1000
MAX_RANGE_SECS = 31 * 86400
_FILTERS = ("trace_id", "request_id", "model", "version", "kind")
_ALLOWED = frozenset((*_FILTERS, "since", "until", "cursor"))


class QueryError(ListParamError):
    """A refused parameter; the message names it."""

    def __init__(self, message: str, reason: str = "value") -> None:
        super().__init__(reason, message)


@dataclass(frozen=True)
class AuditQuery:
    filters: tuple[tuple[str, str], ...]
    since: float | None
    until: float | None
    limit: int
    after: tuple[float, str] | None

    def sql(self, table: str) -> tuple[str, list[Any]]:
        where: list[str] = []
        params: list[Any] = []
        for col, value in self.filters:  # col is one of _FILTERS, never user text
            where.append(f"{col} = ?")
            params.append(value)
        if self.since is not None:
            where.append("at >= ?")
            params.append(self.since)
        if self.until is not None:
            where.append("at <= ?")
            params.append(self.until)
        if self.after is not None:
            where.append("(at < ? OR (at = ? AND id < ?))")
            params.extend([self.after[0], self.after[0], self.after[1]])
        text = f"SELECT id, at, body FROM {table}"
        if where:
            text += " WHERE " + " AND ".join(where)
        text += " ORDER BY at DESC, id DESC LIMIT ?"
        params.append(self.limit + 1)  # one more tells whether there is a next page
        return text, params


def encode_cursor(at: float, event_id: str) -> str:
    return base64.urlsafe_b64encode(orjson.dumps([at, event_id])).decode().rstrip("=")


def decode_cursor(text: str) -> tuple[float, str]:
    if len(text) > 600:
        raise QueryError("cursor: not a cursor this sidecar handed out")
    try:
        raw = base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))
        at, event_id = orjson.loads(raw)
    except (binascii.Error, ValueError, TypeError, orjson.JSONDecodeError):
        raise QueryError("cursor: not a cursor this sidecar handed out") from None
    if (
        not isinstance(at, int | float)
        or isinstance(at, bool)
        or not isinstance(event_id, str)
        or not math.isfinite(at)
        or len(event_id) > 400
    ):
        raise QueryError("cursor: not a cursor this sidecar handed out")
    return float(at), event_id


def _time(name: str, raw: str) -> float:
    try:
        v = float(raw)
    except ValueError:
        raise QueryError(f"{name}: must be Unix seconds, got {raw[:40]!r}") from None
    why = check_unix_seconds(v)
    if why is not None:
        raise QueryError(f"{name}: {why}")
    return v


def parse(items: Iterable[tuple[str, str]], now: float) -> AuditQuery:
    """``items``: every parameter as sent (repeats included), to refuse duplicates and unknown ones."""
    try:
        q = check(items, _ALLOWED, default_limit=MAX_LIMIT // 10, max_limit=MAX_LIMIT)
        filters = [(col, text(col, q.params[col])) for col in _FILTERS if col in q.params]
    except ListParamError as exc:
        raise QueryError(str(exc), exc.reason) from None
    params = q.params
    since = _time("since", params["since"]) if "since" in params else None
    until = _time("until", params["until"]) if "until" in params else None
    if since is not None and until is not None and until < since:
        raise QueryError("until: must not be before since")
    lo = since if since is not None else (until - MAX_RANGE_SECS if until is not None else None)
    hi = until if until is not None else now
    if lo is not None and hi - lo > MAX_RANGE_SECS:
        raise QueryError(f"since..until: at most {MAX_RANGE_SECS // 86400} days at once; page with the cursor")
    limit = q.limit if q.limit is not None else MAX_LIMIT // 10
    after = decode_cursor(params["cursor"]) if "cursor" in params else None
    return AuditQuery(tuple(filters), since, until, limit, after)
