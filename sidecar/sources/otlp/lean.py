"""The lean protobuf request type and the hand-read parts of a span's raw protobuf bytes."""

from __future__ import annotations

import operator
from typing import Any

from google.protobuf import descriptor_pb2, descriptor_pool, message_factory
from opentelemetry.proto.common.v1.common_pb2 import KeyValue
from opentelemetry.proto.resource.v1.resource_pb2 import Resource

from sidecar.records import MODEL_ATTR, VERSION_ATTR, any_pb

__all__ = ["LeanRequest", "model_pb", "service_pb", "span_fields"]

# A KeyValue whose key is the model name / version, as every serializer writes it (key first).
_MODEL_KEY = b"\x0a" + bytes([len(MODEL_ATTR)]) + MODEL_ATTR.encode()
_VERSION_KEY = b"\x0a" + bytes([len(VERSION_ATTR)]) + VERSION_ATTR.encode()


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


LeanRequest = _lean_request_class()
span_fields = operator.attrgetter(
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


def model_pb(attrs: Any) -> tuple[str, str] | None:
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
