"""What the request join keeps of a span while it waits for the other side (``request_records``): a small
named tuple read straight from the span record, so no ``Span`` is built for the JSON records of the OTLP
receiver and the trace-file reader (protobuf records still are: their attributes are raw bytes)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, NamedTuple

from sidecar.model import Span
from sidecar.records import END, FMT, FMT_JSON, FMT_SPAN, RAW, START, STATUS, TRACE, Record, event_times, to_span

__all__ = ["BUCKET_KEYS", "GRPC_KEYS", "HTTP_KEYS", "REQUEST_ID_KEYS", "RULE_KEYS", "Side", "kept", "side"]

HTTP_KEYS = ("http.response.status_code", "http.status_code")
GRPC_KEYS = ("rpc.grpc.status_code",)
RULE_KEYS = ("sidecar.routing_rule", "routing.rule")
BUCKET_KEYS = ("sidecar.canary_bucket", "canary.bucket")
REQUEST_ID_KEYS = ("request.id", "sidecar.request_id", "triton.request_id")
KEPT_ATTRS = frozenset((*HTTP_KEYS, *GRPC_KEYS, *RULE_KEYS, *BUCKET_KEYS, *REQUEST_ID_KEYS))
KEPT_ATTRS |= {"triton.model_name", "triton.model_version"}
_KEPT_CHARS = 200  # a kept attribute's text, as much as a record shows of it
_REASON_CHARS = 1000


class Side(NamedTuple):
    """What a pending join keeps of one span: times, status, the attributes a record reads (text cut to
    ``_KEPT_CHARS``) and its event name -> time map (stage durations). A caller's span can carry megabytes of
    attributes, and up to ``max_pending`` of them wait at once; no ``Span`` is built for it (JSON records)."""

    start: int
    end: int
    status: int
    message: str
    attributes: dict[str, object]
    times: Mapping[str, int]

    @property
    def duration_ns(self) -> int:
        return max(0, self.end - self.start)

    @property
    def is_error(self) -> bool:
        return self.status == 2


def kept(pairs: Any) -> dict[str, object]:
    """The attributes a record reads, of (key, value) pairs (the last of a repeated key wins, as in a dict)."""
    d = dict(pairs)
    common = d.keys() & KEPT_ATTRS
    if not common:
        return {}
    # Request ids are join keys: kept whole (within traces.limits.max_value_chars, like every value).
    return {k: v[:_KEPT_CHARS] if isinstance(v := d[k], str) and k not in REQUEST_ID_KEYS else v for k in common}


def side(r: Record) -> tuple[str, Side]:
    """The trace id (hex) and the slim side of a span record."""
    fmt = r[FMT]
    if fmt == FMT_JSON:
        attrs, message, _ = r[RAW]
        attrs_kept = kept(attrs) if attrs else {}
        return r[TRACE].hex(), Side(r[START], r[END], r[STATUS], message[:_REASON_CHARS], attrs_kept, event_times(r))
    s: Span = r[RAW] if fmt == FMT_SPAN else to_span(r)
    times = {e.name: e.time_unix_nano for e in s.events}
    attrs_kept = kept(s.attributes)
    return s.trace_id, Side(
        s.start_unix_nano, s.end_unix_nano, s.status_code, s.status_message[:_REASON_CHARS], attrs_kept, times
    )
