"""OTLP protobuf trace bodies into span records.

The body is parsed once, with a *lean* message type (``lean``) that has the same field numbers as
``ExportTraceServiceRequest`` but declares attributes, events, status and resource as raw bytes. Reading the
lean message costs ~0.9 us a span against ~3 us for the generated one, because upb builds a Python object for
every sub-message touched; the raw bytes are decoded later, and only when something needs them (``records``).
"""

from __future__ import annotations

from google.protobuf.message import DecodeError
from opentelemetry.proto.trace.v1.trace_pb2 import Status as PbStatus

from sidecar.errors import ParseError
from sidecar.records import FMT_PB
from sidecar.sources.otlp.lean import LeanRequest, model_pb, service_pb, span_fields
from sidecar.sources.otlp.result import DecodeResult

__all__ = ["decode_protobuf"]

_ZERO16 = bytes(16)
_ZERO8 = bytes(8)


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
        req = LeanRequest.FromString(body)
    except DecodeError as exc:
        raise ParseError(f"body is not an OTLP protobuf ExportTraceServiceRequest: {exc}") from None
    out = DecodeResult()
    append = out.records.append
    fields = span_fields
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
                        model = model_pb(attrs)
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
