"""Decode OTLP/HTTP trace bodies (protobuf and JSON) into ``Span`` objects, with partial-success accounting.

JSON is decoded with orjson and walked by hand rather than with ``google.protobuf.json_format.Parse``: OTLP
JSON
writes trace and span ids as hex while the protobuf JSON mapping expects base64, so ``json_format``
silently garbles
ids (and is ~40x slower; see docs/measured-facts.md). Protobuf uses the generated
``ExportTraceServiceRequest``.

A body that cannot be decoded at all raises ``ParseError`` (the receiver answers 400). A span that decodes
but is
unusable (bad ids, wrong field types) is rejected on its own and counted, so one bad span never fails its
batch:
that is OTLP's partial success.
"""

from __future__ import annotations

import base64
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

import orjson
from google.protobuf.message import DecodeError
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

from sidecar.errors import ParseError
from sidecar.model import Span, SpanEvent

__all__ = ["DecodeResult", "decode_json", "decode_protobuf"]

_EMPTY: Mapping[str, object] = MappingProxyType({})
_HEX32 = re.compile(r"[0-9a-fA-F]{32}")
_HEX16 = re.compile(r"[0-9a-fA-F]{16}")
_ZERO_TRACE = "0" * 32
_ZERO_SPAN = "0" * 16
_STATUS_NAMES = {"STATUS_CODE_UNSET": 0, "STATUS_CODE_OK": 1, "STATUS_CODE_ERROR": 2}
_KIND_NAMES = {
    "SPAN_KIND_UNSPECIFIED": 0,
    "SPAN_KIND_INTERNAL": 1,
    "SPAN_KIND_SERVER": 2,
    "SPAN_KIND_CLIENT": 3,
    "SPAN_KIND_PRODUCER": 4,
    "SPAN_KIND_CONSUMER": 5,
}


@dataclass
class DecodeResult:
    spans: list[Span] = field(default_factory=list)
    rejected: int = 0
    first_error: str = ""

    def reject(self, why: str) -> None:
        self.rejected += 1
        if not self.first_error:
            self.first_error = why


# ---------------------------------------------------------------- JSON


def _any_json(v: Mapping[str, Any]) -> object:
    if "stringValue" in v:
        return v["stringValue"]
    if "intValue" in v:
        return int(v["intValue"])
    if "doubleValue" in v:
        return float(v["doubleValue"])
    if "boolValue" in v:
        return bool(v["boolValue"])
    if "arrayValue" in v:
        return tuple(_any_json(x) for x in (v["arrayValue"].get("values") or ()))
    if "kvlistValue" in v:
        return {kv["key"]: _any_json(kv.get("value") or {}) for kv in (v["kvlistValue"].get("values") or ())}
    if "bytesValue" in v:
        return base64.b64decode(v["bytesValue"])
    return None


def _attrs_json(items: Any) -> Mapping[str, object]:
    if not items:
        return _EMPTY
    return {kv["key"]: _any_json(kv.get("value") or {}) for kv in items}


def _enum(v: Any, names: Mapping[str, int]) -> int:
    if v is None:
        return 0
    if isinstance(v, str) and not v.isdigit():
        return names.get(v, 0)
    return int(v)


def decode_json(body: bytes) -> DecodeResult:
    try:
        doc = orjson.loads(body)
    except orjson.JSONDecodeError as exc:
        raise ParseError(f"body is not JSON: {exc}") from None
    if not isinstance(doc, dict):
        raise ParseError("body is not an OTLP ExportTraceServiceRequest object")
    rs_list = doc.get("resourceSpans") or []
    if not isinstance(rs_list, list):
        raise ParseError("resourceSpans must be a list")
    out = DecodeResult()
    spans = out.spans
    for rs in rs_list:
        if not isinstance(rs, dict):
            raise ParseError("resourceSpans items must be objects")
        service = ""
        for kv in (rs.get("resource") or {}).get("attributes") or ():
            if kv.get("key") == "service.name":
                service = str((kv.get("value") or {}).get("stringValue", ""))
        for ss in rs.get("scopeSpans") or rs.get("instrumentationLibrarySpans") or ():
            for s in ss.get("spans") or ():
                try:
                    tid = s["traceId"]
                    sid = s["spanId"]
                    if not _HEX32.fullmatch(tid) or tid == _ZERO_TRACE:
                        out.reject(
                            f"span {s.get('name', '?')!r}: traceId must be 32 hex digits, not all zero"
                        )
                        continue
                    if not _HEX16.fullmatch(sid) or sid == _ZERO_SPAN:
                        out.reject(f"span {s.get('name', '?')!r}: spanId must be 16 hex digits, not all zero")
                        continue
                    pid = s.get("parentSpanId") or None
                    if pid is not None and not _HEX16.fullmatch(pid):
                        out.reject(f"span {s.get('name', '?')!r}: parentSpanId must be 16 hex digits")
                        continue
                    evs = s.get("events")
                    events = (
                        tuple(
                            SpanEvent(e["name"], int(e["timeUnixNano"]), _attrs_json(e.get("attributes")))
                            for e in evs
                        )
                        if evs
                        else ()
                    )
                    st = s.get("status")
                    spans.append(
                        Span(
                            tid.lower(),
                            sid.lower(),
                            pid.lower() if pid else None,
                            str(s.get("name", "")),
                            int(s["startTimeUnixNano"]),
                            int(s["endTimeUnixNano"]),
                            service,
                            _attrs_json(s.get("attributes")),
                            events,
                            _enum(st.get("code"), _STATUS_NAMES) if st else 0,
                            str(st.get("message", "")) if st else "",
                            _enum(s.get("kind"), _KIND_NAMES),
                        )
                    )
                except (KeyError, TypeError, ValueError, AttributeError) as exc:
                    out.reject(
                        f"span {s.get('name', '?') if isinstance(s, dict) else '?'!r}: "
                        f"{type(exc).__name__} {exc}"
                    )
    return out


# ---------------------------------------------------------------- protobuf


def _any_pb(v: Any) -> object:
    which = v.WhichOneof("value")
    if which is None:
        return None
    if which == "array_value":
        return tuple(_any_pb(x) for x in v.array_value.values)
    if which == "kvlist_value":
        return {kv.key: _any_pb(kv.value) for kv in v.kvlist_value.values}
    return getattr(v, which)


def _attrs_pb(items: Any) -> Mapping[str, object]:
    if not items:
        return _EMPTY
    return {kv.key: _any_pb(kv.value) for kv in items}


def decode_protobuf(body: bytes) -> DecodeResult:
    req = ExportTraceServiceRequest()
    try:
        req.ParseFromString(body)
    except DecodeError as exc:
        raise ParseError(f"body is not an OTLP protobuf ExportTraceServiceRequest: {exc}") from None
    out = DecodeResult()
    spans = out.spans
    for rs in req.resource_spans:
        service = ""
        for kv in rs.resource.attributes:
            if kv.key == "service.name":
                service = kv.value.string_value
        for ss in rs.scope_spans:
            for s in ss.spans:
                tid = s.trace_id
                sid = s.span_id
                if len(tid) != 16 or not any(tid):
                    out.reject(f"span {s.name!r}: trace_id must be 16 bytes, not all zero")
                    continue
                if len(sid) != 8 or not any(sid):
                    out.reject(f"span {s.name!r}: span_id must be 8 bytes, not all zero")
                    continue
                pid = s.parent_span_id
                if pid and len(pid) != 8:
                    out.reject(f"span {s.name!r}: parent_span_id must be 8 bytes")
                    continue
                evs = s.events
                events = (
                    tuple(SpanEvent(e.name, e.time_unix_nano, _attrs_pb(e.attributes)) for e in evs)
                    if evs
                    else ()
                )
                st = s.status
                spans.append(
                    Span(
                        tid.hex(),
                        sid.hex(),
                        pid.hex() if pid else None,
                        s.name,
                        s.start_time_unix_nano,
                        s.end_time_unix_nano,
                        service,
                        _attrs_pb(s.attributes),
                        events,
                        st.code,
                        st.message,
                        s.kind,
                    )
                )
    return out
