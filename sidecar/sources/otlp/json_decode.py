"""OTLP JSON trace bodies into span records.

The body is decoded with orjson and walked by hand rather than with ``google.protobuf.json_format.Parse``:
OTLP JSON writes trace and span ids as hex while the protobuf JSON mapping expects base64, so ``json_format``
silently garbles ids (and is ~40x slower; see docs/measured-facts.md). Attribute values are checked lazily: a
malformed one (e.g. ``{"intValue": "x"}``) is kept and shown as its text instead of rejecting the span.
"""

from __future__ import annotations

from typing import Any

import orjson

from sidecar.errors import ParseError
from sidecar.records import (
    FMT_JSON,
    KIND_NAMES,
    MODEL_ATTR,
    VERSION_ATTR,
    Record,
    any_json,
    enum_value,
    status_code_json,
)
from sidecar.sources.otlp.result import DecodeResult

__all__ = ["decode_json", "decode_json_doc", "json_span", "load_json"]

_ZERO16 = bytes(16)
_ZERO8 = bytes(8)
_fromhex = bytes.fromhex


def _attrs_json(items: Any) -> tuple[tuple[str, object], ...]:
    return tuple([(str(kv["key"]), any_json(kv.get("value") or {})) for kv in items])


def _events_json(evs: Any) -> dict[str, int] | tuple[tuple[str, int, tuple[tuple[str, object], ...] | None], ...]:
    """A span's events: name -> ns when that says everything (no event attributes, no repeated name: Triton's
    events), which is also what stage derivation reads; otherwise (name, ns, attributes) tuples."""
    # An event with attributes (even an empty list) is left out here, so the lengths then differ.
    times = {str(e["name"]): int(e["timeUnixNano"]) for e in evs if "attributes" not in e}
    if len(times) == len(evs):
        return times
    out = []
    for e in evs:
        a = e.get("attributes")
        out.append((str(e["name"]), int(e["timeUnixNano"]), _attrs_json(a) if a else None))
    return tuple(out)


def _model_json(attrs: tuple[tuple[str, object], ...]) -> tuple[str, str] | None:
    name = version = None
    for k, v in attrs:
        if k == MODEL_ATTR:
            name = v
        elif k == VERSION_ATTR:
            version = v
    if name is None:
        return None
    return str(name), "" if version is None else str(version)


def _id_problem(s: Any) -> str | None:
    """Why a span's ids are unusable, or None (only asked once the fast path's checks failed)."""
    name = s.get("name", "?")
    for key, digits, zero_ok in (("traceId", 32, False), ("spanId", 16, False), ("parentSpanId", 16, True)):
        v = s.get(key)
        if zero_ok and not v:
            continue
        ok = isinstance(v, str) and len(v) == digits
        if ok:
            try:
                ok = zero_ok or bytes.fromhex(v) != bytes(digits // 2)
            except ValueError:
                ok = False
        if not ok:
            zero = "" if zero_ok else ", not all zero"
            return f"span {name!r}: {key} must be {digits} hex digits{zero}"
    return None


def load_json(body: bytes) -> Any:
    """The body as a JSON document; ``ParseError`` when it is not JSON."""
    try:
        return orjson.loads(body)
    except orjson.JSONDecodeError as exc:
        raise ParseError(f"body is not JSON: {exc}") from None


def json_span(s: Any, service: str, out: DecodeResult) -> Record | None:
    """One OTLP JSON span as a record, or None after rejecting it into ``out``.

    ``decode_json`` calls it for each span whose shape its inlined fast case does not read."""
    try:
        # The common case in one go; any failure is explained by _id_problem.
        tid = s["traceId"]
        sid = s["spanId"]
        pid = s.get("parentSpanId")
        if len(tid) != 32 or len(sid) != 16:
            raise ValueError
        tid = _fromhex(tid)
        sid = _fromhex(sid)
        if pid:
            if len(pid) != 16:
                raise ValueError
            pid = _fromhex(pid)
        else:
            pid = None
        if tid == _ZERO16 or sid == _ZERO8:
            raise ValueError
    except (KeyError, TypeError, ValueError, AttributeError):
        problem = _id_problem(s) if isinstance(s, dict) else None
        out.reject(problem or "span: not an object with traceId and spanId")
        return None
    try:
        evs = s.get("events")
        attrs = s.get("attributes")
        attrs = _attrs_json(attrs) if attrs else None
        st = s.get("status")
        kind = s.get("kind")
        # Only atomic values are kept (no dicts or lists from the document): the cyclic GC then
        # ignores stored spans, which otherwise cost more than everything else at this rate.
        return (
            tid,
            sid,
            pid,
            str(s.get("name", "")),
            int(s["startTimeUnixNano"]),
            int(s["endTimeUnixNano"]),
            status_code_json(st.get("code")) if st else 0,
            _model_json(attrs) if attrs else None,
            _events_json(evs) if evs else (),
            service,
            FMT_JSON,
            (
                attrs,
                str(st.get("message", "")) if st else "",
                kind if type(kind) is int else enum_value(kind, KIND_NAMES),
            ),
        )
    except (KeyError, TypeError, ValueError, AttributeError) as exc:
        out.reject(f"span {s.get('name', '?')!r}: {type(exc).__name__} {exc}")
        return None


def decode_json(body: bytes) -> DecodeResult:
    return decode_json_doc(load_json(body))


def decode_json_doc(doc: Any) -> DecodeResult:
    if not isinstance(doc, dict):
        raise ParseError("body is not an OTLP ExportTraceServiceRequest object")
    rs_list = doc.get("resourceSpans") or []
    if not isinstance(rs_list, list):
        raise ParseError("resourceSpans must be a list")
    out = DecodeResult()
    append = out.records.append
    for rs in rs_list:
        if not isinstance(rs, dict):
            raise ParseError("resourceSpans items must be objects")
        service = ""
        for kv in (rs.get("resource") or {}).get("attributes") or ():
            if kv.get("key") == "service.name":
                service = str((kv.get("value") or {}).get("stringValue", ""))
        for ss in rs.get("scopeSpans") or rs.get("instrumentationLibrarySpans") or ():
            for s in ss.get("spans") or ():
                r = json_span(s, service, out)
                if r is not None:
                    append(r)
    return out

