"""Triton trace requests as spans of the shape Triton's OpenTelemetry mode sends.

``InferRequest`` (HTTP/GRPC events) is the root, a child named after the model (model name, version, request id
attributes; REQUEST/QUEUE events) and its ``compute`` child. Ids are derived from (file path, Triton's trace id,
first timestamp) so a restarted Triton never collides with its earlier traces, and a request read twice gives
the same ids (the store drops the duplicate and counts it).
"""

from __future__ import annotations

import hashlib

from sidecar.model import Span, SpanEvent
from sidecar.sources.trace_files.requests import MAX_NS, Request

__all__ = ["SERVICE", "records_to_spans"]

_REQ_EVENTS = (
    "HTTP_RECV_START",
    "HTTP_RECV_END",
    "INFER_RESPONSE_COMPLETE",
    "HTTP_SEND_START",
    "HTTP_SEND_END",
    "GRPC_WAITREAD_START",
    "GRPC_WAITREAD_END",
    "GRPC_SEND_START",
    "GRPC_SEND_END",
)
_MODEL_EVENTS = ("REQUEST_START", "QUEUE_START", "REQUEST_END")
_COMPUTE_EVENTS = ("COMPUTE_START", "COMPUTE_INPUT_END", "COMPUTE_OUTPUT_START", "COMPUTE_END")
SERVICE = "triton-inference-server"
# A request longer than this is not a request: its timestamps are corrupt (it would also stretch every page).
MAX_REQUEST_NS = 24 * 3600 * 1_000_000_000


def _ids(key: str, n: int) -> str:
    return hashlib.blake2b(key.encode(), digest_size=n).hexdigest()


def plausible(q: Request, offset_ns: int) -> bool:
    """Whether the request's timestamps, mapped to Unix time, are a real request's."""
    if not q.stamps:
        return True
    first, last = min(q.stamps.values()), max(q.stamps.values())
    return last - first <= MAX_REQUEST_NS and first + offset_ns >= 0 and last + offset_ns <= MAX_NS


def records_to_spans(reqs: list[Request], offset_ns: int, path: str) -> list[Span]:
    """Spans for requests (callers check ``plausible`` first); ``offset_ns`` maps Triton's ``ns`` to Unix time."""
    out: list[Span] = []
    for q in reqs:
        s = q.stamps
        if not s:
            continue
        first = min(s.values())
        trace_id = _ids(f"{path}|{q.tid}|{first}", 16)

        def ev(names: tuple[str, ...], s: dict[str, int] = s) -> tuple[SpanEvent, ...]:
            got = sorted((s[n], n) for n in names if n in s)
            return tuple(SpanEvent(n, t + offset_ns) for t, n in got)

        def span(
            span_id: str,
            parent: str | None,
            name: str,
            evs: tuple[SpanEvent, ...],
            attrs: dict[str, object],
            trace_id: str = trace_id,
        ) -> Span:
            first, last = evs[0].time_unix_nano, evs[-1].time_unix_nano
            return Span(trace_id, span_id, parent, name, first, last, SERVICE, attrs, evs, 0, "", 2)

        req_ev, model_ev, comp_ev = ev(_REQ_EVENTS), ev(_MODEL_EVENTS), ev(_COMPUTE_EVENTS)
        root_id = _ids(f"{trace_id}|req", 8) if req_ev else None
        model_id = _ids(f"{trace_id}|model", 8)
        if req_ev and root_id is not None:
            out.append(span(root_id, None, "InferRequest", req_ev, {}))
        if model_ev:
            attrs: dict[str, object] = {
                "triton.model_name": q.model,
                "triton.model_version": q.version,
                "triton.trace_id": q.tid,
            }
            if q.request_id:
                attrs["triton.request_id"] = q.request_id
            out.append(span(model_id, root_id, q.model or "model", model_ev, attrs))
        if comp_ev:
            out.append(span(_ids(f"{trace_id}|compute", 8), model_id if model_ev else root_id, "compute", comp_ev, {}))
    return out
