"""Spans as an OTLP ``ExportTraceServiceRequest`` (protobuf), straight from our frozen ``Span``.

Built with the generated protobuf classes rather than the OpenTelemetry SDK's ``ReadableSpan`` + encoder:
that path built two objects per span and dropped span kind UNSPECIFIED into INTERNAL. Ids, times, kinds,
status, attributes and events go out as they came in.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.proto.common.v1.common_pb2 import AnyValue, KeyValue
from opentelemetry.proto.trace.v1.trace_pb2 import ScopeSpans

from sidecar.model import Span

__all__ = ["encode_spans"]

_I64 = (-(2**63), 2**63 - 1)


def _any(dst: AnyValue, v: object, depth: int = 0) -> None:
    if isinstance(v, str):
        dst.string_value = v
    elif isinstance(v, bool):  # before int: bool is an int
        dst.bool_value = v
    elif isinstance(v, int) and _I64[0] <= v <= _I64[1]:
        dst.int_value = v
    elif isinstance(v, float):
        dst.double_value = v
    elif isinstance(v, bytes):
        dst.bytes_value = v
    elif isinstance(v, (tuple, list)) and depth < 8:
        arr = dst.array_value
        arr.SetInParent()
        for x in v:
            _any(arr.values.add(), x, depth + 1)
    elif isinstance(v, Mapping) and depth < 8:
        kvl = dst.kvlist_value
        kvl.SetInParent()
        for k, x in v.items():
            _kv(kvl.values.add(), str(k), x, depth + 1)
    elif v is not None:
        dst.string_value = str(v)


def _kv(dst: KeyValue, key: str, v: object, depth: int = 0) -> None:
    dst.key = key
    _any(dst.value, v, depth)


def encode_spans(spans: Sequence[Span]) -> bytes:
    req = ExportTraceServiceRequest()
    scopes: dict[str, ScopeSpans] = {}
    for s in spans:
        ss = scopes.get(s.service_name)
        if ss is None:
            rs = req.resource_spans.add()
            if s.service_name:
                _kv(rs.resource.attributes.add(), "service.name", s.service_name)
            ss = scopes[s.service_name] = rs.scope_spans.add()
        p = ss.spans.add()
        p.trace_id = bytes.fromhex(s.trace_id)
        p.span_id = bytes.fromhex(s.span_id)
        if s.parent_span_id:
            p.parent_span_id = bytes.fromhex(s.parent_span_id)
        p.name = s.name
        p.kind = s.kind
        p.start_time_unix_nano = s.start_unix_nano
        p.end_time_unix_nano = s.end_unix_nano
        for k, v in s.attributes.items():
            _kv(p.attributes.add(), k, v)
        for e in s.events:
            pe = p.events.add()
            pe.name = e.name
            pe.time_unix_nano = e.time_unix_nano
            for k, v in e.attributes.items():
                _kv(pe.attributes.add(), k, v)
        if s.status_code or s.status_message:
            p.status.code = s.status_code
            p.status.message = s.status_message
    return req.SerializeToString()
