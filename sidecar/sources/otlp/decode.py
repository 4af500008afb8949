"""Decode OTLP/HTTP trace bodies (protobuf and JSON) into span records, with partial-success accounting.

JSON is decoded with orjson and walked by hand rather than with ``google.protobuf.json_format.Parse``: OTLP
JSON writes trace and span ids as hex while the protobuf JSON mapping expects base64, so ``json_format``
silently garbles ids (and is ~40x slower; see docs/measured-facts.md).

Protobuf is parsed once, with a *lean* message type declared below that has the same field numbers as
``ExportTraceServiceRequest`` but declares attributes, events, status and resource as raw bytes. Reading the
lean message costs ~0.9 us a span against ~3 us for the generated one, because upb builds a Python object for
every sub-message touched; the raw bytes are decoded later, and only when something needs them (``records``).

A body that cannot be decoded at all raises ``ParseError`` (the receiver answers 400). A span that decodes
but is unusable (bad ids, wrong field types) is rejected on its own and counted, so one bad span never fails
its batch: that is OTLP's partial success. Attribute values are checked lazily: a malformed one (e.g.
``{"intValue": "x"}``) is kept and shown as its text instead of rejecting the span.
"""

from __future__ import annotations

import operator
from dataclasses import dataclass, field
from typing import Any

import orjson
from google.protobuf import descriptor_pb2, descriptor_pool, message_factory
from google.protobuf.message import DecodeError
from opentelemetry.proto.common.v1.common_pb2 import KeyValue
from opentelemetry.proto.resource.v1.resource_pb2 import Resource
from opentelemetry.proto.trace.v1.trace_pb2 import Status as PbStatus

from sidecar.errors import ParseError
from sidecar.model import Span
from sidecar.records import (
    FMT_JSON,
    FMT_PB,
    KIND_NAMES,
    MODEL_ATTR,
    VERSION_ATTR,
    Record,
    any_json,
    any_pb,
    enum_value,
    status_code_json,
    to_span,
)

__all__ = ["DecodeResult", "decode_json", "decode_json_doc", "decode_protobuf", "json_span", "load_json", "service_pb"]

_ZERO16 = bytes(16)
_ZERO8 = bytes(8)
_fromhex = bytes.fromhex
# A KeyValue whose key is the model name / version, as every serializer writes it (key first).
_MODEL_KEY = b"\x0a" + bytes([len(MODEL_ATTR)]) + MODEL_ATTR.encode()
_VERSION_KEY = b"\x0a" + bytes([len(VERSION_ATTR)]) + VERSION_ATTR.encode()


@dataclass
class DecodeResult:
    records: list[Record] = field(default_factory=list)
    rejected: int = 0
    first_error: str = ""

    @property
    def spans(self) -> list[Span]:
        """The accepted spans as frozen ``Span`` objects (built on each call; the hot path never asks)."""
        return [to_span(r) for r in self.records]

    def reject(self, why: str) -> None:
        self.rejected += 1
        if not self.first_error:
            self.first_error = why


# ---------------------------------------------------------------- JSON


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


# ---------------------------------------------------------------- protobuf


def _lean_request_class() -> Any:
    """``ExportTraceServiceRequest`` with the same wire layout, sub-messages we read lazily left as bytes."""
    f = descriptor_pb2.FieldDescriptorProto
    fd = descriptor_pb2.FileDescriptorProto(
        name="sidecar_traces_lean_otlp.proto", package="sidecar.traces.lean", syntax="proto3"
    )

    def message(name: str, fields: list[tuple[int, str, int, bool, str]]) -> None:
        m = fd.message_type.add(name=name)
        for number, fname, ftype, repeated, type_name in fields:
            fdp = m.field.add(
                name=fname,
                number=number,
                type=ftype,
                label=f.LABEL_REPEATED if repeated else f.LABEL_OPTIONAL,
            )
            if type_name:
                fdp.type_name = type_name

    message(
        "Span",
        [
            (1, "trace_id", f.TYPE_BYTES, False, ""),
            (2, "span_id", f.TYPE_BYTES, False, ""),
            (4, "parent_span_id", f.TYPE_BYTES, False, ""),
            (5, "name", f.TYPE_STRING, False, ""),
            (6, "kind", f.TYPE_INT32, False, ""),
            (7, "start_time_unix_nano", f.TYPE_FIXED64, False, ""),
            (8, "end_time_unix_nano", f.TYPE_FIXED64, False, ""),
            (9, "attributes", f.TYPE_BYTES, True, ""),
            (11, "events", f.TYPE_BYTES, True, ""),
            (15, "status", f.TYPE_BYTES, False, ""),
        ],
    )
    message("ScopeSpans", [(2, "spans", f.TYPE_MESSAGE, True, ".sidecar.traces.lean.Span")])
    message(
        "ResourceSpans",
        [
            (1, "resource", f.TYPE_BYTES, False, ""),
            (2, "scope_spans", f.TYPE_MESSAGE, True, ".sidecar.traces.lean.ScopeSpans"),
        ],
    )
    message("Request", [(1, "resource_spans", f.TYPE_MESSAGE, True, ".sidecar.traces.lean.ResourceSpans")])
    pool = descriptor_pool.DescriptorPool()
    pool.Add(fd)
    return message_factory.GetMessageClass(pool.FindMessageTypeByName("sidecar.traces.lean.Request"))


_LeanRequest = _lean_request_class()
_span_fields = operator.attrgetter(
    "trace_id",
    "span_id",
    "parent_span_id",
    "name",
    "start_time_unix_nano",
    "end_time_unix_nano",
    "status",
    "attributes",
    "events",
    "kind",
)


def service_pb(raw: bytes) -> str:
    """``service.name`` of a protobuf ``Resource`` (raises ``DecodeError`` when it does not decode)."""
    if not raw:
        return ""
    for kv in Resource.FromString(raw).attributes:
        if kv.key == "service.name":
            return kv.value.string_value
    return ""


_MODEL_LEN = len(_MODEL_KEY)
_VERSION_LEN = len(_VERSION_KEY)


def _short_value(b: bytes, k: int) -> str | None:
    """The value of a KeyValue whose key ends at ``k``, when it is the short string or small int every
    serializer writes for Triton's model attributes (``0x12 len 0x0a len str`` / ``0x12 2 0x18 int``); None
    for anything else (the caller then parses it properly). Read by hand: ``KeyValue.FromString`` plus the
    oneof lookup cost ~1 us, a fifth of a span's budget."""
    if len(b) < k + 4 or b[k] != 0x12 or b[k + 1] != len(b) - k - 2:
        return None
    tag, n = b[k + 2], b[k + 3]
    if tag == 0x0A and n == len(b) - k - 4:
        try:
            return b[k + 4 :].decode()
        except UnicodeDecodeError:
            return None
    if tag == 0x18 and n < 0x80 and len(b) == k + 4:
        return str(n)
    return None


def _model_pb(attrs: Any) -> tuple[str, str] | None:
    """(model, version) from a span's raw attributes, or None when it has no model attribute.

    Raises ``DecodeError`` when an attribute that may be the model's does not decode."""
    name: object = None
    version: object = None
    for b in attrs:
        if b.startswith(_MODEL_KEY):
            v = _short_value(b, _MODEL_LEN)
            if v is not None:
                name = v
                continue
        elif b.startswith(_VERSION_KEY):
            v = _short_value(b, _VERSION_LEN)
            if v is not None:
                version = v
                continue
        elif b[:1] == b"\x0a":
            continue  # another key, written first as every serializer does
        kv = KeyValue.FromString(b)
        if kv.key == MODEL_ATTR:
            name = any_pb(kv.value)
        elif kv.key == VERSION_ATTR:
            version = any_pb(kv.value)
    if name is None:
        return None
    return str(name), "" if version is None else str(version)


def decode_protobuf(body: bytes) -> DecodeResult:
    """Decode a protobuf body with the lean message type alone.

    The generated class is not run over the body first: the lean parse already rejects anything that is not
    a well-formed request down to the spans' fields (garbage, truncation: tested, and fuzzed against the
    generated class with truncations at every offset). What it does not check is the inside of attributes,
    events and status; those are decoded when needed: status and the model attributes here (a span whose
    status or model attribute does not decode is rejected on its own), events by stage derivation (an
    undecodable one is skipped) and everything when a ``Span`` is built (undecodable parts are left out and
    counted in the span's ``sidecar.undecodable`` attribute).
    """
    try:
        req = _LeanRequest.FromString(body)
    except DecodeError as exc:
        raise ParseError(f"body is not an OTLP protobuf ExportTraceServiceRequest: {exc}") from None
    out = DecodeResult()
    append = out.records.append
    fields = _span_fields
    for rs in req.resource_spans:
        try:
            service = service_pb(rs.resource)
        except DecodeError:
            raise ParseError("a resource in the body does not decode") from None
        for ss in rs.scope_spans:
            for s in ss.spans:
                tid, sid, pid, name, start, end, st, attrs, evs, kind = fields(s)
                if len(tid) != 16 or tid == _ZERO16:
                    out.reject(f"span {name!r}: trace_id must be 16 bytes, not all zero")
                    continue
                if len(sid) != 8 or sid == _ZERO8:
                    out.reject(f"span {name!r}: span_id must be 8 bytes, not all zero")
                    continue
                if pid and len(pid) != 8:
                    out.reject(f"span {name!r}: parent_span_id must be 8 bytes")
                    continue
                try:
                    if attrs:
                        attrs = tuple(attrs)
                        model = _model_pb(attrs)
                    else:
                        attrs = model = None
                    code = PbStatus.FromString(st).code if st else 0
                except DecodeError:
                    out.reject(f"span {name!r}: its status or model attributes do not decode")
                    continue
                append(
                    (
                        tid,
                        sid,
                        pid or None,
                        name,
                        start,
                        end,
                        code,
                        model,
                        # Copied out so a stored span never keeps the whole request's upb arena alive.
                        tuple(evs) if evs else None,
                        service,
                        FMT_PB,
                        (attrs, st, kind),
                    )
                )
    return out
