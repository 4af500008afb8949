"""Decode OTLP/HTTP trace bodies (protobuf and JSON) into span records, with partial-success accounting.

JSON is decoded with orjson and walked by hand rather than with ``google.protobuf.json_format.Parse``: OTLP
JSON writes trace and span ids as hex while the protobuf JSON mapping expects base64, so ``json_format``
silently garbles ids (and is ~40x slower; see docs/measured-facts.md).

Protobuf is parsed once, with a *lean* message type (``lean``) that has the same field numbers as
``ExportTraceServiceRequest`` but declares attributes, events, status and resource as raw bytes. Reading the
lean message costs ~0.9 us a span against ~3 us for the generated one, because upb builds a Python object for
every sub-message touched; the raw bytes are decoded later, and only when something needs them (``records``).

A body that cannot be decoded at all raises ``ParseError`` (the receiver answers 400). A span that decodes
but is unusable (bad ids, wrong field types) is rejected on its own and counted, so one bad span never fails
its batch: that is OTLP's partial success. Attribute values are checked lazily: a malformed one (e.g.
``{"intValue": "x"}``) is kept and shown as its text instead of rejecting the span.
"""

from __future__ import annotations

from sidecar.sources.otlp.json_decode import decode_json, decode_json_doc, json_span, load_json
from sidecar.sources.otlp.lean import service_pb
from sidecar.sources.otlp.pb_decode import decode_protobuf
from sidecar.sources.otlp.result import DecodeResult

__all__ = ["DecodeResult", "decode_json", "decode_json_doc", "decode_protobuf", "json_span", "load_json", "service_pb"]
