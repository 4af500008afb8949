"""What the request join keeps of a span while it waits for the other side (``request_records``): a plain tuple
read straight from the span record, so no ``Span`` is built for the JSON records of the OTLP receiver and the
trace-file reader (protobuf records still are: their attributes are raw bytes).

A side is ``(start ns, end ns, status code, message, attributes, event times)``, read by the index constants
below: a tuple is made in one step and read by index, where a named tuple's constructor and properties are
Python calls (the join runs at 150,000+ spans/s on one core, a few microseconds a span). The attributes are
the few a record reads (text cut to ``KEPT_CHARS``; a caller's span can carry megabytes of attributes, and up
to ``max_pending`` of them wait at once). A caller's side keeps no message and no event times (a record reads
neither of them).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from sidecar.model import Span
from sidecar.records import END, FMT, FMT_JSON, FMT_SPAN, RAW, START, STATUS, TRACE, Record, event_times, to_span

__all__ = [
    "BUCKET_KEYS",
    "GRPC_KEYS",
    "HTTP_KEYS",
    "KEPT_CHARS",
    "REASON_CHARS",
    "REQUEST_ID_KEYS",
    "RULE_KEYS",
    "STATUS_KEYS",
    "S_ATTRS",
    "S_END",
    "S_MESSAGE",
    "S_START",
    "S_STATUS",
    "S_TIMES",
    "Pairs",
    "Side",
    "first",
    "get",
    "kept",
    "side",
]

HTTP_KEYS = ("http.response.status_code", "http.status_code")
GRPC_KEYS = ("rpc.grpc.status_code",)
STATUS_KEYS = (*HTTP_KEYS, *GRPC_KEYS)
RULE_KEYS = ("sidecar.routing_rule", "routing.rule")
BUCKET_KEYS = ("sidecar.canary_bucket", "canary.bucket")
REQUEST_ID_KEYS = ("request.id", "sidecar.request_id", "triton.request_id")
KEPT_ATTRS = frozenset((*HTTP_KEYS, *GRPC_KEYS, *RULE_KEYS, *BUCKET_KEYS, *REQUEST_ID_KEYS))
KEPT_ATTRS |= {"triton.model_name", "triton.model_version"}
KEPT_CHARS = 200  # a kept attribute's text, as much as a record shows of it
REASON_CHARS = 1000

# A side: (start ns, end ns, status code, message, kept attributes, event times or None): the event times a
# name -> ns dict, or a tuple of names shared between spans with the values after it in the side, one each
# (``request_records``).
Side = tuple[Any, ...]
S_START, S_END, S_STATUS, S_MESSAGE, S_ATTRS, S_TIMES = range(6)


Pairs = tuple[tuple[str, object], ...]


def kept(pairs: Any) -> Pairs:
    """The attributes a record reads, of (key, value) pairs or a mapping (of pairs, the last of a repeated key
    wins, as in a dict), as (key, value) pairs: a tuple of plain values, which the garbage collector stops
    tracking (a dict it tracks for as long as it lives, and a waiting join holds several)."""
    if type(pairs) is not tuple and isinstance(pairs, Mapping):
        pairs = pairs.items()
    d = {k: v for k, v in pairs if k in KEPT_ATTRS}
    for k, v in d.items():
        # Request ids are join keys: kept whole (within traces.limits.max_value_chars, like every value).
        if isinstance(v, str) and len(v) > KEPT_CHARS and k not in REQUEST_ID_KEYS:
            d[k] = v[:KEPT_CHARS]  # a new value, not a new key: the dict may be written while read
    return tuple(d.items())


def first(attrs: Pairs, keys: Sequence[str]) -> object | None:
    """The value of the first of ``keys`` present in kept ``attrs`` (even a None value: the next key is not
    tried then)."""
    for k in keys:
        for name, v in attrs:
            if name == k:
                return v
    return None


def get(attrs: Pairs, key: str, default: object) -> object:
    """``attrs[key]`` of kept attributes, else ``default``."""
    for name, v in attrs:
        if name == key:
            return v
    return default


def side(r: Record) -> tuple[str, Side]:
    """The trace id (hex) and the side of any span record (the join reads JSON records inline, the same way)."""
    fmt = r[FMT]
    if fmt == FMT_JSON:
        attrs, message, _ = r[RAW]
        attrs_kept = kept(attrs) if attrs else ()
        return r[TRACE].hex(), (r[START], r[END], r[STATUS], message[:REASON_CHARS], attrs_kept, event_times(r))
    s: Span = r[RAW] if fmt == FMT_SPAN else to_span(r)
    times = {e.name: e.time_unix_nano for e in s.events}
    return s.trace_id, (
        s.start_unix_nano,
        s.end_unix_nano,
        s.status_code,
        s.status_message[:REASON_CHARS],
        kept(s.attributes),
        times,
    )
