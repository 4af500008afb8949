"""How probe traffic is marked, so the paths that feed SLIs, drift and business checks can leave it out.

The model probe (``sidecar/checks/probe/``) sends every request with an id starting ``sidecar-probe-`` and a
W3C ``traceparent`` whose trace id starts with ``PROBE_TRACE_PREFIX`` ("sidecarp" in hex; a random trace id
matches it with chance 2^-64), plus the header ``x-sidecar-probe: 1``. Triton copies the request id into its
spans (``triton.request_id``) and trace files and propagates the trace id, so the events sources drop events
whose ``request_id`` is a probe's and the OTLP receiver drops spans whose trace is a probe's (each counted).

Depends only on ``sidecar.model``, so sources and checks may both import it.
"""

from __future__ import annotations

from typing import Any

from sidecar.model import Event

__all__ = [
    "PROBE_HEADER",
    "PROBE_REQUEST_PREFIX",
    "PROBE_TRACE_PREFIX",
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


def split_probe_records(records: list[Any]) -> tuple[list[Any], int]:
    """Span records (``sidecar.records``, trace id bytes first) without the probe's, and how many were."""
    kept = [r for r in records if r[0][:8] != _PROBE_TRACE_BYTES]
    return kept, len(records) - len(kept)
