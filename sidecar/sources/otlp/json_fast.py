"""The fast path for OTLP JSON bodies: msgspec typed structs, for bodies where every span is well-formed.

``msgspec`` decodes a Triton body into these structs in about half the time ``orjson.loads`` takes to build
dicts, and reading struct attributes is cheaper than ``dict.get``. The structs only describe the clean case:
anything else (a wrong type, a bad id, a time out of range, a name over a limit, text to truncate, array, map or
bytes attribute values) makes ``decode_fast`` answer None, and the body is decoded again by ``json_decode``,
which rejects span by span and names every problem. So this path never decides anything on its own; a
differential property test and the fuzz target hold it to giving the same records as ``json_decode`` wherever
it answers. One leniency is left: a number beyond a double's range (``1e999``) in a field the receiver does not
read is skipped here, where orjson refuses the whole body.

Structs are ``gc=False`` (decoded JSON cannot hold a cycle; tracking ~700 objects a body only fed the collector)
and a body is first decoded with events that may hold nothing but a name and a time (``BareEvent``), so the
clean Triton case needs no per-event look at attributes; a body with anything more in an event is decoded
again with the full ``Event``.
"""

from __future__ import annotations

from typing import Any, Generic, TypeVar

import msgspec
from msgspec import UNSET, UnsetType

from sidecar.errors import SidecarError
from sidecar.records import FMT_JSON, KIND_NAMES, Record, enum_value, status_code_json
from sidecar.sources.otlp.limits import SpanLimits
from sidecar.sources.otlp.result import DecodeResult, hex_ids, model_of

__all__ = ["decode_fast"]

_MAX_NS = (1 << 64) - 1
_MIN_I64, _MAX_I64 = -(1 << 63), (1 << 63) - 1


class _Slow(SidecarError):
    """This body needs the precise path."""


class AnyValue(msgspec.Struct, frozen=True, gc=False):
    stringValue: str | UnsetType = UNSET
    intValue: int | str | UnsetType = UNSET
    doubleValue: float | UnsetType = UNSET
    boolValue: bool | UnsetType = UNSET
    # Declared so that their presence is seen (msgspec skips unknown fields); any of them means the slow path.
    arrayValue: Any = UNSET
    kvlistValue: Any = UNSET
    bytesValue: Any = UNSET


class KeyValue(msgspec.Struct, frozen=True, gc=False):
    key: str
    value: AnyValue | UnsetType | None = UNSET


class Event(msgspec.Struct, frozen=True, gc=False):
    name: str
    timeUnixNano: int | str
    attributes: list[KeyValue] | UnsetType | None = UNSET


class BareEvent(msgspec.Struct, frozen=True, gc=False, forbid_unknown_fields=True):
    """An event with nothing but a name and a time (Triton's): any other field, attributes included, fails
    the decode, and the body is decoded again with ``Event``. Declared apart so the clean case needs no
    per-event check for attributes."""

    name: str
    timeUnixNano: int | str


E = TypeVar("E", Event, BareEvent)


class Status(msgspec.Struct, frozen=True, gc=False):
    code: int | str | None = None
    message: str = ""


class Span(msgspec.Struct, Generic[E], frozen=True, gc=False):
    traceId: str
    spanId: str
    startTimeUnixNano: int | str
    endTimeUnixNano: int | str
    parentSpanId: str | None = None
    name: str = ""
    kind: int | str | None = None
    attributes: list[KeyValue] | None = None
    events: list[E] | None = None
    status: Status | None = None


class ScopeSpans(msgspec.Struct, Generic[E], frozen=True, gc=False):
    spans: list[Span[E]] | None = None


class Resource(msgspec.Struct, frozen=True, gc=False):
    attributes: list[KeyValue] | None = None


class ResourceSpans(msgspec.Struct, Generic[E], frozen=True, gc=False):
    resource: Resource | None = None
    scopeSpans: list[ScopeSpans[E]] | None = None
    instrumentationLibrarySpans: list[ScopeSpans[E]] | None = None


class Request(msgspec.Struct, Generic[E], frozen=True, gc=False):
    resourceSpans: list[ResourceSpans[E]] | None = None


# Bare events first (every Triton body); a body any of whose events has more is decoded again with Event.
_bare_decoder = msgspec.json.Decoder(Request[BareEvent])
_decoder = msgspec.json.Decoder(Request[Event])


def _int64(n: int) -> int:
    """``n`` when it fits int64. msgspec reads a longer JSON integer exactly, orjson as a float: the walk's
    answer is the one that counts, so such a body goes there."""
    if not _MIN_I64 <= n <= _MAX_I64:
        raise _Slow
    return n


def _value(v: AnyValue | UnsetType | None) -> object:
    """``records.any_json`` of the same value (the same order of fields)."""
    if v is None or v is UNSET:
        return None
    assert isinstance(v, AnyValue)
    if v.stringValue is not UNSET:
        return v.stringValue
    if v.intValue is not UNSET:
        return _int64(int(v.intValue))  # a ValueError sends the body to the slow path, which keeps it as text
    if v.doubleValue is not UNSET:
        return float(v.doubleValue)
    if v.boolValue is not UNSET:
        return v.boolValue
    if v.arrayValue is not UNSET or v.kvlistValue is not UNSET or v.bytesValue is not UNSET:
        raise _Slow
    return None


def _attrs(kvs: list[KeyValue], nmax: int) -> tuple[tuple[str, object], ...]:
    res = []
    for kv in kvs:
        k = kv.key
        v = _value(kv.value)
        # Within the name limit is within every limit; anything longer goes the precise way.
        if len(k) > nmax or (type(v) is str and len(v) > nmax) or (type(v) is int and len(str(v)) > nmax):
            raise _Slow
        res.append((k, v))
    return tuple(res)


def _events(evs: list[Event] | list[BareEvent], nmax: int) -> Any:
    if type(evs[0]) is BareEvent or all(e.attributes is UNSET for e in evs):  # type: ignore[union-attr]
        times = {e.name: int(e.timeUnixNano) for e in evs}
        if len(times) == len(evs):
            ns = times.values()
            if max(map(len, times)) > nmax or min(ns) < 0 or max(ns) > _MAX_NS:
                raise _Slow
            return times
    out = []
    for e in evs:
        t = int(e.timeUnixNano)
        if len(e.name) > nmax or not 0 <= t <= _MAX_NS:
            raise _Slow
        a = getattr(e, "attributes", None)
        out.append((e.name, t, _attrs(a, nmax) if a else None))
    return tuple(out)


def _span(s: Span[Any], service: str, nmax: int, vmax: int) -> Record:
    try:
        tid, sid, pid = hex_ids(s.traceId, s.spanId, s.parentSpanId)
    except ValueError:
        raise _Slow from None
    name = s.name
    start = int(s.startTimeUnixNano)
    end = int(s.endTimeUnixNano)
    if len(name) > nmax or not (0 <= start <= _MAX_NS and 0 <= end <= _MAX_NS):
        raise _Slow
    attrs = _attrs(s.attributes, nmax) if s.attributes else None
    st = s.status
    if st is not None and len(st.message) > vmax:
        raise _Slow
    kind = s.kind
    if type(kind) is int:
        _int64(kind)
    if st is not None and type(st.code) is int:
        _int64(st.code)
    evs = s.events
    return (
        tid,
        sid,
        pid,
        name,
        start,
        end,
        status_code_json(st.code) if st is not None else 0,
        model_of(attrs) if attrs else None,
        _events(evs, nmax) if evs else (),
        service,
        FMT_JSON,
        (attrs, st.message if st is not None else "", kind if type(kind) is int else enum_value(kind, KIND_NAMES)),
    )


def _service(rs: ResourceSpans[Any], nmax: int) -> str:
    service = ""
    res = rs.resource
    if res is not None:
        for kv in res.attributes or ():
            if kv.key == "service.name":
                v = kv.value
                service = v.stringValue if isinstance(v, AnyValue) and v.stringValue is not UNSET else ""
    if len(service) > nmax:
        raise _Slow
    return service


def decode_fast(body: bytes, lim: SpanLimits) -> DecodeResult | None:
    """The records of a body whose spans are all clean, or None (then ``json_decode`` decides)."""
    # msgspec does not check the UTF-8 of fields it skips; orjson checks the whole body. ASCII (Triton's
    # bodies) is checked at memory speed, anything else is given to the walk.
    if not body.isascii():
        try:
            body.decode()
        except UnicodeDecodeError:
            return None
    req: Request[Any]
    try:
        req = _bare_decoder.decode(body)
    except msgspec.ValidationError:
        try:
            req = _decoder.decode(body)
        except msgspec.DecodeError:  # ValidationError is one
            return None
    except msgspec.DecodeError:
        return None
    out = DecodeResult()
    append = out.records.append
    nmax = lim.name_chars
    vmax = lim.value_chars
    try:
        for rs in req.resourceSpans or ():
            service = _service(rs, nmax)
            for ss in (rs.scopeSpans if rs.scopeSpans else rs.instrumentationLibrarySpans) or ():
                for s in ss.spans or ():
                    append(_span(s, service, nmax, vmax))
    except (_Slow, ValueError, TypeError, KeyError, AttributeError, OverflowError):
        return None
    return out
