"""The compiled OTLP receiver path (``sidecar/traces/_otlpfast.c``) behind a small Python face.

The extension decodes a body, groups its spans by trace, builds the store entries of traces it has not seen
and adds up their stage observations, in one call per request; the Python code in ``otlp_decode``,
``store`` and ``stages`` stays the reference it must equal and the path for everything the extension hands
back (``None`` for a protobuf body of a shape it does not read; single JSON spans go to
``otlp_decode.json_span``). It is optional: without a C compiler at install time the module is missing and
the receiver runs the Python path alone (``available()`` is False, ``sidecar_otlp_native_enabled`` is 0).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from sidecar.traces.otlp_decode import DecodeResult, json_span, service_pb
from sidecar.traces.records import Record

try:
    from sidecar.traces import _otlpfast as _ext  # type: ignore[attr-defined]
except ImportError:  # pragma: no cover - exercised only where the extension did not build
    _ext = None

__all__ = ["MAX_BUCKETS", "NativeIngest", "available"]

MAX_BUCKETS = 64  # as in _otlpfast.c

# (records, items), or None: items are the batch's traces in order of first appearance (a tuple per new trace,
# a list of records for the per-span path) and 1-tuples of stage observations between them; see _otlpfast.c.
Outcome = tuple[list[Record], list[Any]]


def available() -> bool:
    return _ext is not None


class NativeIngest:
    """One per trace hub: the histogram bounds are fixed for its life."""

    def __init__(self, bounds: Sequence[float]) -> None:
        if _ext is None:
            raise RuntimeError("the compiled OTLP path (sidecar.traces._otlpfast) is not installed")
        if len(bounds) > MAX_BUCKETS:
            raise ValueError(f"the compiled OTLP path takes at most {MAX_BUCKETS} buckets, not {len(bounds)}")
        self._bounds = tuple(float(b) for b in bounds)

    def protobuf(self, body: bytes, plain: Any, kept: Any, limit: int) -> Outcome | None:
        out: Outcome | None = _ext.ingest_pb(body, service_pb, plain, kept, limit, self._bounds)
        return out

    def json(self, doc: Any, result: DecodeResult, plain: Any, kept: Any, limit: int) -> Outcome | None:
        """``result`` collects the spans ``json_span`` rejects; on None it holds nothing to keep."""
        out: Outcome | None = _ext.ingest_json(doc, json_span, result, plain, kept, limit, self._bounds)
        return out

    @staticmethod
    def decode_protobuf(body: bytes) -> list[Record] | None:
        """The records of a body alone (tests compare them with ``otlp_decode.decode_protobuf``)."""
        out = _ext.ingest_pb(body, service_pb, None, None, 0, ())
        return None if out is None else out[0]

    @staticmethod
    def decode_json(doc: Any, result: DecodeResult) -> list[Record] | None:
        out = _ext.ingest_json(doc, json_span, result, None, None, 0, ())
        return None if out is None else out[0]
