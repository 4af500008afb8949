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
from sidecar.sources.otlp.json_fast import decode_fast
from sidecar.sources.otlp.limits import (
    DEFAULT_LIMITS,
    SpanLimitError,
    SpanLimits,
    bound_value,
    key_reason,
    show,
    truncate,
)
from sidecar.sources.otlp.result import DecodeResult, hex_ids, model_of

__all__ = ["decode_json", "decode_json_doc", "json_span", "load_json"]

_MAX_NS = (1 << 64) - 1
_MIN_I64, _MAX_I64 = -(1 << 63), (1 << 63) - 1


def _attrs_json(items: Any, lim: SpanLimits, out: DecodeResult, fld: str) -> tuple[tuple[str, object], ...]:
    """Attributes as (key, value) tuples, bounded: a key (or a model/version value) over the name limit raises
    ``SpanLimitError``, a stored value over the value limit is truncated and counted under ``fld``."""
    res = tuple([(str(kv["key"]), any_json(kv.get("value") or {})) for kv in items])
    nmax = lim.name_chars
    # Only a key or value longer than a name can break a limit: the common case is this one cheap pass.
    for k, v in res:
        t = type(v)
        if len(k) > nmax:
            break
        if t is str:
            if len(v) > nmax:  # type: ignore[arg-type]
                break
        elif t is int:
            if not _MIN_I64 <= v <= _MAX_I64:  # type: ignore[operator]
                break
        elif t is not float and t is not bool and v is not None:
            break
    else:
        return res
    return _attrs_bounded(res, lim, out, fld)


def _attrs_bounded(
    res: tuple[tuple[str, object], ...], lim: SpanLimits, out: DecodeResult, fld: str
) -> tuple[tuple[str, object], ...]:
    nmax = lim.name_chars
    vmax = lim.value_chars
    bounded = []
    for k, v in res:
        if len(k) > nmax:
            raise SpanLimitError("attribute_key", f"attributes[{show(k)}]", len(k), nmax)
        if k in (MODEL_ATTR, VERSION_ATTR):
            n = len(str(v))
            if n > nmax:
                raise SpanLimitError(key_reason(k), f"attributes[{k!r}]", n, nmax)
        if type(v) is str:
            if len(v) > vmax:
                v = truncate(v, vmax)
                out.truncated(fld)
        else:
            v = bound_value(v, lim, out.truncations, fld)
        bounded.append((k, v))
    return tuple(bounded)


def _ns(v: Any) -> int:
    """A time in ns: an integer that fits OTLP's fixed64 (anything else would break date and duration maths)."""
    n = int(v)
    if n < 0 or n > _MAX_NS:
        raise ValueError(f"event time {n!s:.40} is outside 0..2^64-1 ns")
    return n


def _events_json(
    evs: Any, lim: SpanLimits, out: DecodeResult
) -> dict[str, int] | tuple[tuple[str, int, tuple[tuple[str, object], ...] | None], ...]:
    """A span's events: name -> ns when that says everything (no event attributes, no repeated name: Triton's
    events), which is also what stage derivation reads; otherwise (name, ns, attributes) tuples."""
    # An event with attributes (even an empty list) is left out here, so the lengths then differ.
    times = {str(e["name"]): int(e["timeUnixNano"]) for e in evs if "attributes" not in e}
    if len(times) == len(evs):
        ns = times.values()
        if times and (max(map(len, times)) > lim.name_chars or min(ns) < 0 or max(ns) > _MAX_NS):
            _events_list(evs, lim, out)  # raises, naming the event
        return times
    return _events_list(evs, lim, out)


def _events_list(
    evs: Any, lim: SpanLimits, out: DecodeResult
) -> tuple[tuple[str, int, tuple[tuple[str, object], ...] | None], ...]:
    res = []
    for i, e in enumerate(evs):
        name = str(e["name"])
        if len(name) > lim.name_chars:
            raise SpanLimitError("event_name", f"events[{i}].name", len(name), lim.name_chars)
        a = e.get("attributes")
        try:
            attrs = _attrs_json(a, lim, out, "event_attribute_value") if a else None
        except SpanLimitError as exc:
            raise exc.at(f"events[{i}]") from None
        res.append((name, _ns(e["timeUnixNano"]), attrs))
    return tuple(res)


def _id_problem(s: Any) -> str | None:
    """Why a span's ids are unusable, or None (only asked once the fast path's checks failed)."""
    name = show(str(s.get("name", "?")))
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
            return f"span {name}: {key} must be {digits} hex digits{zero}"
    return None


def load_json(body: bytes) -> Any:
    """The body as a JSON document; ``ParseError`` when it is not JSON."""
    try:
        return orjson.loads(body)
    except orjson.JSONDecodeError as exc:
        raise ParseError(f"body is not JSON: {exc}") from None


def json_span(s: Any, service: str, out: DecodeResult, lim: SpanLimits = DEFAULT_LIMITS) -> Record | None:
    """One OTLP JSON span as a record, or None after rejecting it into ``out``; ``SpanLimitError`` when one of
    its names is over the limit (the whole request is refused)."""
    try:
        # The common case in one go; any failure is explained by _id_problem.
        tid, sid, pid = hex_ids(s["traceId"], s["spanId"], s.get("parentSpanId"))
    except (KeyError, TypeError, ValueError, AttributeError):
        problem = _id_problem(s) if isinstance(s, dict) else None
        out.reject(problem or "span: not an object with traceId and spanId")
        return None
    try:
        name = str(s.get("name", ""))
        if len(name) > lim.name_chars:
            raise SpanLimitError("span_name", "name", len(name), lim.name_chars)
        evs = s.get("events")
        attrs = s.get("attributes")
        attrs = _attrs_json(attrs, lim, out, "attribute_value") if attrs else None
        st = s.get("status")
        kind = s.get("kind")
        message = str(st.get("message", "")) if st else ""
        if len(message) > lim.value_chars:
            message = truncate(message, lim.value_chars)
            out.truncated("status_message")
        start = int(s["startTimeUnixNano"])
        end = int(s["endTimeUnixNano"])
        if not (0 <= start <= _MAX_NS and 0 <= end <= _MAX_NS):
            raise ValueError(f"startTimeUnixNano {start!s:.40} or endTimeUnixNano {end!s:.40} is outside 0..2^64-1")
        # Only atomic values are kept (no dicts or lists from the document): the cyclic GC then
        # ignores stored spans, which otherwise cost more than everything else at this rate.
        return (
            tid,
            sid,
            pid,
            name,
            start,
            end,
            status_code_json(st.get("code")) if st else 0,
            model_of(attrs) if attrs else None,
            _events_json(evs, lim, out) if evs else (),
            service,
            FMT_JSON,
            (
                attrs,
                message,
                kind if type(kind) is int else enum_value(kind, KIND_NAMES),
            ),
        )
    except (KeyError, TypeError, ValueError, AttributeError) as exc:
        out.reject(f"span {show(str(s.get('name', '?')))}: {type(exc).__name__} {str(exc)[:200]}")
        return None


def decode_json(body: bytes, lim: SpanLimits = DEFAULT_LIMITS) -> DecodeResult:
    """A JSON body's records: the typed fast path when every span is clean, else the walk below."""
    fast = decode_fast(body, lim)
    return fast if fast is not None else decode_json_doc(load_json(body), lim)


def _objects(v: Any, what: str) -> list[Any]:
    if v is None:
        return []
    if not isinstance(v, list) or not all(isinstance(x, dict) for x in v):
        raise ParseError(f"{what} must be a list of objects")
    return v


def _service(rs: dict[str, Any], lim: SpanLimits) -> str:
    resource = rs.get("resource") or {}
    if not isinstance(resource, dict):
        raise ParseError("resource must be an object")
    service = ""
    for kv in _objects(resource.get("attributes"), "resource.attributes"):
        if kv.get("key") == "service.name":
            value = kv.get("value") or {}
            service = str(value.get("stringValue", "")) if isinstance(value, dict) else ""
    if len(service) > lim.name_chars:
        raise SpanLimitError("service_name", 'resource.attributes["service.name"]', len(service), lim.name_chars)
    return service


def decode_json_doc(doc: Any, lim: SpanLimits = DEFAULT_LIMITS) -> DecodeResult:
    if not isinstance(doc, dict):
        raise ParseError("body is not an OTLP ExportTraceServiceRequest object")
    rs_list = doc.get("resourceSpans") or []
    if not isinstance(rs_list, list):
        raise ParseError("resourceSpans must be a list")
    out = DecodeResult()
    append = out.records.append
    for i, rs in enumerate(rs_list):
        if not isinstance(rs, dict):
            raise ParseError("resourceSpans items must be objects")
        try:
            service = _service(rs, lim)
        except SpanLimitError as exc:
            raise exc.at(f"resourceSpans[{i}]") from None
        key = "scopeSpans" if rs.get("scopeSpans") else "instrumentationLibrarySpans"
        for j, ss in enumerate(_objects(rs.get(key), key)):
            spans = ss.get("spans") or []
            if not isinstance(spans, list):
                raise ParseError(f"{key}.spans must be a list")
            try:
                for s in spans:
                    r = json_span(s, service, out, lim)
                    if r is not None:
                        append(r)
            except SpanLimitError as exc:
                # Found by identity only now: keeping a span index in the loop costs every span.
                k = next(n for n, x in enumerate(spans) if x is s)
                raise exc.at(f"resourceSpans[{i}].{key}[{j}].spans[{k}]") from None
    return out
