"""How probe traffic is marked, so the paths that feed SLIs, drift and business checks can leave it out.

The model probe (``sidecar/checks/probe/``) sends every request with an id starting ``sidecar-probe-`` and a
W3C ``traceparent`` whose trace id starts with ``PROBE_TRACE_PREFIX`` ("sidecarp" in hex; a random trace id
matches it with chance 2^-64), plus the header ``x-sidecar-probe: 1``. Triton copies the request id into its
spans (``triton.request_id``, on the model's span) and trace files and propagates the trace id, so the events
sources drop events whose ``request_id`` is a probe's and the OTLP receiver drops spans whose trace is a probe's
(each counted).

The trace id alone is not enough over gRPC: Triton 2.51 (and its main branch at 2.73) reads the ``traceparent``
metadata as a C string (``GrpcServerCarrier::Get`` in ``src/grpc/infer_handler.h`` returns
``it->second.data()`` of a ``grpc::string_ref``, which is not NUL-terminated), so the bytes that happen to
follow the value in memory are read with it; OpenTelemetry C++ then refuses a traceparent that is not exactly
55 characters, and Triton starts a trace of its own (measured: 2 to 3 of 40 probes over one channel). Such a
probe request's spans carry a random trace id, but its model span still carries ``triton.request_id``. So
``ProbeTraces`` also takes a trace for a probe's when one of its spans carries a probe's request id, drops the
whole trace from that export, and remembers the trace id (bounded) for its spans that come in a later export.

Depends only on ``sidecar.model``, so sources and checks may both import it.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from typing import Any

from sidecar.model import Event

__all__ = [
    "PROBE_HEADER",
    "PROBE_REQUEST_PREFIX",
    "PROBE_TRACE_PREFIX",
    "ProbeLedger",
    "ProbeTraces",
    "is_probe_request",
    "is_probe_trace",
    "split_probe_events",
    "split_probe_records",
]

PROBE_REQUEST_PREFIX = "sidecar-probe-"
PROBE_TRACE_PREFIX = "7369646563617270"
PROBE_HEADER = "x-sidecar-probe"
_PROBE_TRACE_BYTES = bytes.fromhex(PROBE_TRACE_PREFIX)


def is_probe_request(request_id: str | None) -> bool:
    """True for a request id the probe sent."""
    return bool(request_id) and str(request_id).startswith(PROBE_REQUEST_PREFIX)


def is_probe_trace(trace_id: bytes | str) -> bool:
    """True for a trace id the probe made (raw 16 bytes or 32 hex digits)."""
    if isinstance(trace_id, bytes):
        return trace_id[:8] == _PROBE_TRACE_BYTES
    return trace_id[:16].lower() == PROBE_TRACE_PREFIX


def split_probe_events(events: list[Event]) -> tuple[list[Event], int]:
    """``events`` without the probe's, and how many were the probe's (the caller counts them)."""
    kept = [e for e in events if not is_probe_request(e.request_id)]
    return kept, len(events) - len(kept)


def split_probe_records(records: list[Any], traces: ProbeTraces | None = None) -> tuple[list[Any], int]:
    """Span records (``sidecar.records``, trace id bytes first) without the probe's, and how many were. With
    ``traces``, a span that carries a probe's ``triton.request_id`` marks its whole trace as a probe's too."""
    if traces is not None:
        return traces.split(records)
    kept = [r for r in records if r[0][:8] != _PROBE_TRACE_BYTES]
    return kept, len(records) - len(kept)


_REQUEST_ID_ATTR = "triton.request_id"
_REQUEST_ID_BYTES = _REQUEST_ID_ATTR.encode()
_PREFIX_BYTES = PROBE_REQUEST_PREFIX.encode()
# Record slots (sidecar.records; not imported: this module depends on sidecar.model only).
_MODEL, _FMT, _RAW = 7, 10, 11
_FMT_SPAN, _FMT_JSON = 0, 1


def _carries_probe_request_id(r: Any) -> bool:
    """True when a span record's ``triton.request_id`` is a probe's (only Triton's model span carries one,
    and only records with a model are looked at)."""
    fmt, raw = r[_FMT], r[_RAW]
    if fmt == _FMT_SPAN:
        return is_probe_request(raw.attributes.get(_REQUEST_ID_ATTR))
    attrs = raw[0]
    if not attrs:
        return False
    if fmt == _FMT_JSON:
        for k, v in attrs:
            if k == _REQUEST_ID_ATTR:
                return type(v) is str and v.startswith(PROBE_REQUEST_PREFIX)
        return False
    # Protobuf: raw KeyValue bytes (key field, then the AnyValue holding the string): two substring tests.
    return any(_PREFIX_BYTES in b and _REQUEST_ID_BYTES in b for b in attrs)


class ProbeTraces:
    """Trace ids known to be the probe's, for the receiver: those with the probe's prefix, and those of which
    one span carried a probe's request id (remembered, at most ``max_traces``, oldest forgotten first)."""

    def __init__(self, max_traces: int = 4096) -> None:
        self.max_traces = max_traces
        self._seen: OrderedDict[bytes, None] = OrderedDict()

    def split(self, records: list[Any]) -> tuple[list[Any], int]:
        seen = self._seen
        found = [r[0] for r in records if r[_MODEL] is not None and _carries_probe_request_id(r)]
        for t in found:
            if t[:8] != _PROBE_TRACE_BYTES:
                seen[t] = None
                seen.move_to_end(t)
        while len(seen) > self.max_traces:
            seen.popitem(last=False)
        if seen:
            kept = [r for r in records if r[0][:8] != _PROBE_TRACE_BYTES and r[0] not in seen]
        else:
            kept = [r for r in records if r[0][:8] != _PROBE_TRACE_BYTES]
        return kept, len(records) - len(kept)


class ProbeLedger:
    """How many probe requests Triton answered and how many it failed, per (model, version) the probe asked
    for, cumulative since the sidecar started: the probe records (``record``), the Triton SLI deriver reads
    (``totals``) and subtracts them from Triton's own counters (sidecar/processors/probe_share.py). A probe that
    timed out or found Triton unreachable is not recorded: whether Triton counted it is not known. Bounded:
    ``max_keys`` pairs (the probe's configured models), more are dropped and counted in ``dropped``."""

    def __init__(self, max_keys: int = 4096) -> None:
        self.max_keys = max_keys
        self._lock = threading.Lock()
        self._totals: dict[tuple[str, str], tuple[int, int]] = {}
        self.dropped = 0

    def record(self, model: str, version: str, *, answered: bool) -> None:
        with self._lock:
            key = (model, version)
            a, f = self._totals.get(key, (0, 0))
            if key not in self._totals and len(self._totals) >= self.max_keys:
                self.dropped += 1
                return
            self._totals[key] = (a + 1, f) if answered else (a, f + 1)

    def totals(self) -> dict[tuple[str, str], tuple[int, int]]:
        """(answered, failed) per (model, version); version ``""`` when the probe let Triton pick."""
        with self._lock:
            return dict(self._totals)
