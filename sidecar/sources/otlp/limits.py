"""Bounds on every span string that can become a label, a key or stored text, applied before anything is stored.

Two kinds of field, two answers:

- *Names* (span name, model, version, attribute keys, event names, ``service.name``) become metric labels,
  dict keys and page rows; one 1 MB model name made ``/metrics`` 20 MB larger. A name over
  ``max_name_chars`` refuses the whole request (``SpanLimitError``, a ``ParseError``: the receiver answers
  400 naming the field), because a shortened name would silently merge series or traces.
- *Stored text* (attribute values, event attribute values, the status message) is only shown; a value over
  ``max_value_chars`` is kept cut to the limit, ending with ``TRUNCATED``, and counted per field.

``bound_span`` applies the same rules to a frozen ``Span`` built elsewhere: the Triton trace-file source calls
it for each span it builds (a refused span is dropped and counted there). The decoders check their own raw
forms inline (``json_decode``, ``pb_decode``) because a call per span would cost a tenth of the ingest budget.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from opentelemetry.proto.common.v1.common_pb2 import AnyValue, KeyValue
from opentelemetry.proto.trace.v1.trace_pb2 import Span as PbSpan
from opentelemetry.proto.trace.v1.trace_pb2 import Status as PbStatus

from sidecar.errors import ParseError
from sidecar.model import Span, SpanEvent
from sidecar.records import MODEL_ATTR, VERSION_ATTR, any_pb

__all__ = [
    "DEFAULT_LIMITS",
    "REASONS",
    "TRUNCATED",
    "TRUNCATED_FIELDS",
    "SpanLimitError",
    "SpanLimits",
    "bound_pb_attrs",
    "bound_pb_events",
    "bound_pb_status",
    "bound_span",
    "bound_value",
    "key_reason",
    "show",
    "truncate",
]

TRUNCATED = "…[truncated]"
_TRUNCATED_B = TRUNCATED.encode()
# The label values of the refusal and truncation counters (fixed sets, so the counters stay bounded).
REASONS = ("span_name", "model", "version", "attribute_key", "event_name", "service_name")
TRUNCATED_FIELDS = ("attribute_value", "event_attribute_value", "status_message")


@dataclass(frozen=True)
class SpanLimits:
    name_chars: int = 128
    value_chars: int = 4096


DEFAULT_LIMITS = SpanLimits()


def show(s: str) -> str:
    """A name for an error message: never the whole of a 1 MB one."""
    return repr(s if len(s) <= 40 else s[:40] + "...")


class SpanLimitError(ParseError):
    """A name over ``max_name_chars``; ``where`` is the field's path, extended by each decoder level."""

    def __init__(self, reason: str, where: str, size: int, limit: int) -> None:
        self.reason = f"{reason}_too_long"
        self.where = where
        self.size = size
        self.limit = limit
        super().__init__(self._text())

    def _text(self) -> str:
        return f"{self.where}: {self.size} characters, over the limit of {self.limit} (traces.limits.max_name_chars)"

    def at(self, prefix: str) -> SpanLimitError:
        self.where = f"{prefix}.{self.where}" if self.where else prefix
        self.args = (self._text(),)
        return self


def key_reason(key: str) -> str:
    """The refusal reason of an attribute whose *value* is too long to be a name."""
    return "model" if key == MODEL_ATTR else "version"


def truncate(s: str, limit: int) -> str:
    return s[: limit - len(TRUNCATED)] + TRUNCATED


def _check_name(reason: str, where: str, s: str, lim: SpanLimits) -> None:
    if len(s) > lim.name_chars:
        raise SpanLimitError(reason, where, len(s), lim.name_chars)


def bound_value(v: Any, lim: SpanLimits, counts: dict[str, int], fld: str) -> Any:
    """A decoded attribute value (any shape) with every string over the limit truncated and each counted under
    ``fld``; keys of nested maps are names (``SpanLimitError``)."""
    t = type(v)
    if t is str:
        if len(v) > lim.value_chars:
            counts[fld] = counts.get(fld, 0) + 1
            return truncate(v, lim.value_chars)
        return v
    if t is bytes:
        if len(v) > lim.value_chars:
            counts[fld] = counts.get(fld, 0) + 1
            return v[: lim.value_chars - len(_TRUNCATED_B)] + _TRUNCATED_B
        return v
    if t is tuple or t is list:
        return tuple(bound_value(x, lim, counts, fld) for x in v)
    if t is dict:
        for k in v:
            _check_name("attribute_key", f"[{show(str(k))}]", str(k), lim)
        return {k: bound_value(x, lim, counts, fld) for k, x in v.items()}
    return v


def _bound_attrs_map(
    attrs: Mapping[str, object], lim: SpanLimits, counts: dict[str, int], where: str, fld: str
) -> Mapping[str, object]:
    changed = False
    out: dict[str, object] = {}
    for k, v in attrs.items():
        _check_name("attribute_key", f"{where}[{show(k)}]", k, lim)
        if k in (MODEL_ATTR, VERSION_ATTR):
            _check_name(key_reason(k), f"{where}[{k!r}]", str(v), lim)
        b = bound_value(v, lim, counts, fld)
        changed = changed or b is not v
        out[k] = b
    return out if changed else attrs


def bound_span(s: Span, lim: SpanLimits) -> tuple[Span, dict[str, int]]:
    """The span with stored text truncated, and the truncations by field; ``SpanLimitError`` for a name
    over the limit."""
    counts: dict[str, int] = {}
    _check_name("span_name", "name", s.name, lim)
    _check_name("service_name", "service_name", s.service_name, lim)
    attrs = _bound_attrs_map(s.attributes, lim, counts, "attributes", "attribute_value")
    events = []
    for i, e in enumerate(s.events):
        _check_name("event_name", f"events[{i}].name", e.name, lim)
        ea = _bound_attrs_map(e.attributes, lim, counts, f"events[{i}].attributes", "event_attribute_value")
        events.append(e if ea is e.attributes else SpanEvent(e.name, e.time_unix_nano, ea))
    message = s.status_message
    if len(message) > lim.value_chars:
        message = truncate(message, lim.value_chars)
        counts["status_message"] = 1
    if not counts:
        return s, counts
    return dataclasses.replace(s, attributes=attrs, events=tuple(events), status_message=message), counts


# ---------------------------------------------------------------- raw protobuf parts (the slow path)


def _bound_any_pb(v: AnyValue, lim: SpanLimits, counts: dict[str, int], fld: str) -> None:
    which = v.WhichOneof("value")
    if which == "string_value":
        if len(v.string_value) > lim.value_chars:
            v.string_value = truncate(v.string_value, lim.value_chars)
            counts[fld] = counts.get(fld, 0) + 1
    elif which == "bytes_value":
        if len(v.bytes_value) > lim.value_chars:
            v.bytes_value = v.bytes_value[: lim.value_chars - len(_TRUNCATED_B)] + _TRUNCATED_B
            counts[fld] = counts.get(fld, 0) + 1
    elif which == "array_value":
        for x in v.array_value.values:
            _bound_any_pb(x, lim, counts, fld)
    elif which == "kvlist_value":
        for kv in v.kvlist_value.values:
            _check_name("attribute_key", f"[{show(kv.key)}]", kv.key, lim)
            _bound_any_pb(kv.value, lim, counts, fld)


def _bound_kv_pb(kv: KeyValue, lim: SpanLimits, counts: dict[str, int], where: str, fld: str) -> None:
    _check_name("attribute_key", f"{where}[{show(kv.key)}]", kv.key, lim)
    if kv.key in (MODEL_ATTR, VERSION_ATTR):
        _check_name(key_reason(kv.key), f"{where}[{kv.key!r}]", str(any_pb(kv.value)), lim)
    _bound_any_pb(kv.value, lim, counts, fld)


def bound_pb_attrs(raw: tuple[bytes, ...], lim: SpanLimits, counts: dict[str, int]) -> tuple[bytes, ...]:
    """Raw ``KeyValue`` bytes bounded: only one longer than ``name_chars`` bytes can hold anything over a
    limit, so only those are parsed (``DecodeError`` when one does not decode)."""
    out = []
    for b in raw:
        if len(b) > lim.name_chars:
            kv = KeyValue.FromString(b)
            before = dict(counts)
            _bound_kv_pb(kv, lim, counts, "attributes", "attribute_value")
            if counts != before:
                b = kv.SerializeToString()
        out.append(b)
    return tuple(out)


def bound_pb_events(raw: tuple[bytes, ...], lim: SpanLimits, counts: dict[str, int]) -> tuple[bytes, ...]:
    """Raw ``Span.Event`` bytes bounded, as ``bound_pb_attrs``."""
    out = []
    for i, b in enumerate(raw):
        if len(b) > lim.name_chars:
            e = PbSpan.Event.FromString(b)
            _check_name("event_name", f"events[{i}].name", e.name, lim)
            before = dict(counts)
            for kv in e.attributes:
                _bound_kv_pb(kv, lim, counts, f"events[{i}].attributes", "event_attribute_value")
            if counts != before:
                b = e.SerializeToString()
        out.append(b)
    return tuple(out)


def bound_pb_status(raw: bytes, lim: SpanLimits, counts: dict[str, int]) -> bytes:
    """Raw ``Status`` bytes with the message truncated (asked only when the bytes exceed ``value_chars``)."""
    st = PbStatus.FromString(raw)
    if len(st.message) <= lim.value_chars:
        return raw
    st.message = truncate(st.message, lim.value_chars)
    counts["status_message"] = counts.get("status_message", 0) + 1
    return st.SerializeToString()
