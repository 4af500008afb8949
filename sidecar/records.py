"""The receiver's internal span record: a plain tuple, built cheaply at ingest and turned into a frozen ``Span``
only when someone reads it (a page, the forwarder, a bus subscriber).

Why not build ``Span`` objects at ingest: at 100,000-200,000 spans/s on one core the budget is a few
microseconds per span, and building a frozen ``Span`` with its ``SpanEvent`` objects and attribute dicts costs
about as much as everything else together (docs/traces.md, "Throughput"). Ingest needs only the ids, the times,
the status code, the model attribute and, for Triton spans, the event times; the rest stays as the decoder
left it (tuples of atomic values, raw protobuf bytes, or the ``Span`` a file source built) until it is read.

Record layout (index constants below): trace id (16 bytes), span id (8 bytes), parent span id (8 bytes or
None), name, start ns, end ns, status code, (model, version) or None, events, service name, format, raw. The
*events* slot holds what stage derivation reads: a name -> ns dict (Span; JSON when no event has attributes
and no name repeats, as in Triton's spans), (name, ns, attributes) tuples (other JSON), or the raw protobuf
``Event`` bytes (decoded only when a stage needs them, see ``event_times``). Protobuf attributes, events and
status are kept as the bytes the lean parse left (``otlp_decode``) and were not validated: building a
``Span`` leaves out what does not decode and counts it in the ``sidecar.undecodable`` attribute.
"""

from __future__ import annotations

import base64
import struct
from collections.abc import Mapping
from types import MappingProxyType
from typing import Any

from google.protobuf.message import DecodeError
from opentelemetry.proto.common.v1.common_pb2 import KeyValue
from opentelemetry.proto.trace.v1.trace_pb2 import Span as PbSpan
from opentelemetry.proto.trace.v1.trace_pb2 import Status as PbStatus

from sidecar.model import Span, SpanEvent

__all__ = [
    "END",
    "EVENTS",
    "FMT",
    "FMT_JSON",
    "FMT_PB",
    "FMT_SPAN",
    "KIND_NAMES",
    "MODEL",
    "MODEL_ATTR",
    "NAME",
    "PARENT",
    "RAW",
    "SERVICE",
    "SPAN",
    "START",
    "STATUS",
    "TRACE",
    "TRACE_FILE_SOURCE",
    "TRITON_COMPUTE_EVENTS",
    "TRITON_MODEL_EVENTS",
    "TRITON_REQUEST_EVENTS",
    "VERSION_ATTR",
    "Record",
    "any_json",
    "any_pb",
    "enum_value",
    "event_times",
    "from_span",
    "status_code_json",
    "to_span",
]

MODEL_ATTR = "triton.model_name"
VERSION_ATTR = "triton.model_version"
# The bus source of the spans read from Triton's trace files. Their trace ids are derived by the reader (from the
# file, Triton's trace id and first timestamp: sidecar.sources.trace_files.spans), so no caller can send one.
TRACE_FILE_SOURCE = "trace_file"
# Triton's trace events by the span a trace-file request puts them on: its ``InferRequest`` root (the frontend's),
# the model's span and its ``compute`` child (sidecar.sources.trace_files.spans).
TRITON_REQUEST_EVENTS = (
    "HTTP_RECV_START",
    "HTTP_RECV_END",
    "INFER_RESPONSE_COMPLETE",
    "HTTP_SEND_START",
    "HTTP_SEND_END",
    "GRPC_WAITREAD_START",
    "GRPC_WAITREAD_END",
    "GRPC_SEND_START",
    "GRPC_SEND_END",
)
TRITON_MODEL_EVENTS = ("REQUEST_START", "QUEUE_START", "REQUEST_END")
TRITON_COMPUTE_EVENTS = ("COMPUTE_START", "COMPUTE_INPUT_END", "COMPUTE_OUTPUT_START", "COMPUTE_END")

TRACE, SPAN, PARENT, NAME, START, END, STATUS, MODEL, EVENTS, SERVICE, FMT, RAW = range(12)
FMT_SPAN, FMT_JSON, FMT_PB = 0, 1, 2

# A tuple, not a class: creating one costs ~50 ns against ~500 ns for a dataclass with twelve fields.
Record = tuple[Any, ...]

_EMPTY: Mapping[str, object] = MappingProxyType({})
_STATUS_NAMES = {"STATUS_CODE_UNSET": 0, "STATUS_CODE_OK": 1, "STATUS_CODE_ERROR": 2}
KIND_NAMES = {
    "SPAN_KIND_UNSPECIFIED": 0,
    "SPAN_KIND_INTERNAL": 1,
    "SPAN_KIND_SERVER": 2,
    "SPAN_KIND_CLIENT": 3,
    "SPAN_KIND_PRODUCER": 4,
    "SPAN_KIND_CONSUMER": 5,
}
_EVENT_HEAD = struct.Struct("<BQBB").unpack_from


def enum_value(v: Any, names: Mapping[str, int]) -> int:
    """An OTLP JSON enum given as its number or its name (unknown names read as 0)."""
    if v is None:
        return 0
    if isinstance(v, str) and not v.isdigit():
        return names.get(v, 0)
    return int(v)


def status_code_json(v: Any) -> int:
    return enum_value(v, _STATUS_NAMES)


# ---------------------------------------------------------------- events


def _pb_event_times(raw: Any) -> dict[str, int]:
    """Name -> ns of raw protobuf ``Span.Event`` messages.

    Hand-read because upb builds a Python object per sub-message field access (~0.5 us per event, most of the
    protobuf ingest budget): every serializer we know writes ``time_unix_nano`` (fixed64, tag 0x09) and then
    ``name`` (tag 0x12, short length), so that layout is read directly and anything else goes through the
    generated class, and an event that does not decode even so is skipped (its stages are not observed).
    """
    out: dict[str, int] = {}
    for b in raw:
        # 0x09 <fixed64 time> 0x12 <len> <name>: one C call reads the tags, the time and the length.
        if len(b) > 10:
            t0, ns, t1, n = _EVENT_HEAD(b)
            if t0 == 9 and t1 == 0x12 and n < 128:
                try:
                    out[b[11 : 11 + n].decode()] = ns
                    continue
                except UnicodeDecodeError:
                    pass
        try:
            e = PbSpan.Event.FromString(b)
        except DecodeError:
            continue
        out[e.name] = e.time_unix_nano
    return out


def event_times(r: Record) -> Mapping[str, int]:
    """Event name -> time (ns) of a record, for stage derivation (the last event of a name wins)."""
    ev = r[EVENTS]
    fmt = r[FMT]
    if fmt == FMT_JSON:
        return ev if type(ev) is dict else {e[0]: e[1] for e in ev}
    if fmt == FMT_PB:
        return _pb_event_times(ev) if ev else {}
    return ev


# ---------------------------------------------------------------- materialising


def any_json(v: Mapping[str, Any]) -> object:
    """An OTLP JSON ``AnyValue`` as a Python value; a malformed one is kept as its text rather than lost."""
    try:
        if "stringValue" in v:
            return v["stringValue"]
        if "intValue" in v:
            return int(v["intValue"])
        if "doubleValue" in v:
            return float(v["doubleValue"])
        if "boolValue" in v:
            return bool(v["boolValue"])
        if "arrayValue" in v:
            return tuple(any_json(x) for x in (v["arrayValue"].get("values") or ()))
        if "kvlistValue" in v:
            return {kv["key"]: any_json(kv.get("value") or {}) for kv in (v["kvlistValue"].get("values") or ())}
        if "bytesValue" in v:
            return base64.b64decode(v["bytesValue"])
    except (KeyError, TypeError, ValueError, AttributeError):
        return str(v)
    return None


def any_pb(v: Any) -> object:
    which = v.WhichOneof("value")
    if which is None:
        return None
    if which == "array_value":
        return tuple(any_pb(x) for x in v.array_value.values)
    if which == "kvlist_value":
        return {kv.key: any_pb(kv.value) for kv in v.kvlist_value.values}
    return getattr(v, which)


def _kvs_pb(kvs: Any) -> Mapping[str, object]:
    out = {kv.key: any_pb(kv.value) for kv in kvs}
    return out or _EMPTY


def _attrs_pb(raw: Any) -> tuple[dict[str, object], int]:
    """Attributes from raw ``KeyValue`` bytes, and how many did not decode (the body was not validated below
    the span fields, see ``otlp_decode.decode_protobuf``)."""
    out: dict[str, object] = {}
    bad = 0
    for b in raw or ():
        try:
            kv = KeyValue.FromString(b)
        except DecodeError:
            bad += 1
            continue
        out[kv.key] = any_pb(kv.value)
    return out, bad


def _events_of_json(ev: Any) -> tuple[SpanEvent, ...]:
    if type(ev) is dict:
        return tuple(SpanEvent(n, t, _EMPTY) for n, t in ev.items())
    return tuple(SpanEvent(n, t, dict(a) if a else _EMPTY) for n, t, a in ev)


def _to_span_json(r: Record) -> Span:
    attrs, message, kind = r[RAW]
    return Span(
        r[TRACE].hex(),
        r[SPAN].hex(),
        r[PARENT].hex() if r[PARENT] else None,
        r[NAME],
        r[START],
        r[END],
        r[SERVICE],
        dict(attrs) if attrs else _EMPTY,
        _events_of_json(r[EVENTS]),
        r[STATUS],
        message,
        kind,
    )


def _to_span_pb(r: Record) -> Span:
    attrs_raw, status_raw, kind = r[RAW]
    attrs, bad = _attrs_pb(attrs_raw)
    events = []
    for b in r[EVENTS] or ():
        try:
            e = PbSpan.Event.FromString(b)
        except DecodeError:
            bad += 1
            continue
        events.append(SpanEvent(e.name, e.time_unix_nano, _kvs_pb(e.attributes)))
    try:
        message = PbStatus.FromString(status_raw).message if status_raw else ""
    except DecodeError:  # cannot happen: the decoder read the status code from the same bytes
        message = ""
    if bad:
        attrs["sidecar.undecodable"] = bad
    return Span(
        r[TRACE].hex(),
        r[SPAN].hex(),
        r[PARENT].hex() if r[PARENT] else None,
        r[NAME],
        r[START],
        r[END],
        r[SERVICE],
        attrs or _EMPTY,
        tuple(events),
        r[STATUS],
        message,
        kind,
    )


def to_span(r: Record) -> Span:
    """The frozen ``Span`` of a record (ids as lowercase hex)."""
    fmt = r[FMT]
    if fmt == FMT_SPAN:
        return r[RAW]
    if fmt == FMT_JSON:
        return _to_span_json(r)
    return _to_span_pb(r)


def from_span(s: Span) -> Record:
    """A record for a ``Span`` built elsewhere (trace files, tests); ids must be valid hex."""
    m = s.attributes.get(MODEL_ATTR)
    model = (str(m), str(s.attributes.get(VERSION_ATTR, ""))) if m is not None else None
    return (
        bytes.fromhex(s.trace_id),
        bytes.fromhex(s.span_id),
        bytes.fromhex(s.parent_span_id) if s.parent_span_id else None,
        s.name,
        s.start_unix_nano,
        s.end_unix_nano,
        s.status_code,
        model,
        {e.name: e.time_unix_nano for e in s.events},
        s.service_name,
        FMT_SPAN,
        s,
    )
