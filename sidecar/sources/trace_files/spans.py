"""Triton trace requests as spans of the shape Triton's OpenTelemetry mode sends.

``InferRequest`` (HTTP/GRPC events) is the root, a child named after the model (model name, version, request id
attributes; REQUEST/QUEUE events) and its ``compute`` child. Ids are derived from (file path, Triton's trace id,
first timestamp) so a restarted Triton never collides with its earlier traces, and a request read twice gives
the same ids (the store drops the duplicate and counts it).
"""

from __future__ import annotations

from binascii import hexlify as _hexlify
from collections.abc import Sequence
from hashlib import blake2b as _blake2b
from typing import Any

from sidecar.model import Span
from sidecar.records import (
    FMT_JSON,
    TRITON_COMPUTE_EVENTS,
    TRITON_MODEL_EVENTS,
    TRITON_REQUEST_EVENTS,
    Record,
    to_span,
)
from sidecar.sources.trace_files.requests import MAX_NS, Request
from sidecar.sources.trace_files.streams import SPAN_NAME, StreamFigures, stream_figures

__all__ = [
    "ROOT_NAME",
    "SERVICE",
    "Bounds",
    "clock_groups",
    "plausible",
    "plausible_of",
    "records_to_spans",
    "span_records",
    "stream_records",
    "whole_of",
]

SERVICE = "triton-inference-server"
ROOT_NAME = "InferRequest"  # the root span of a request with frontend events
# Event name -> the span it goes on: 0 InferRequest, 1 the model span, 2 compute.
_SPANS = (TRITON_REQUEST_EVENTS, TRITON_MODEL_EVENTS, TRITON_COMPUTE_EVENTS)
_GROUP = {n: g for g, names in enumerate(_SPANS) for n in names}
_KNOWN, _REQ, _MODEL, _COMPUTE = map(frozenset, (_GROUP, *_SPANS))
_NO_ATTRS: tuple[Any, ...] = ((), "", 2)  # the JSON record's (attributes, status message, kind)
# A request longer than this is not a request: its timestamps are corrupt (it would also stretch every page).
MAX_REQUEST_NS = 24 * 3600 * 1_000_000_000


def plausible(q: Request, offset_ns: int) -> bool:
    """Whether the request's timestamps, mapped to Unix time, are a real request's."""
    if not q.stamps:
        return True
    first, last = min(q.stamps.values()), max(q.stamps.values())
    return last - first <= MAX_REQUEST_NS and first + offset_ns >= 0 and last + offset_ns <= MAX_NS


Bounds = tuple[int, int] | None  # a request's first and last time (None: no timestamps)


def plausible_of(reqs: list[Request], offset_ns: int, bounds: list[Bounds]) -> list[Request]:
    """The requests that are ``plausible``, from each one's (first, last) times already taken."""
    lo, hi = -offset_ns, MAX_NS - offset_ns
    return [
        q
        for q, b in zip(reqs, bounds, strict=True)
        if b is None or (b[1] - b[0] <= MAX_REQUEST_NS and b[0] >= lo and b[1] <= hi)
    ]


def clock_groups(
    reqs: list[Request], now_ns: int, mono_ns: int, mtime_ns: int
) -> list[tuple[list[Request], int, list[Bounds]]]:
    """Requests grouped by the offset that maps their ``ns`` to Unix time: ``mono_ns``, our monotonic clock's
    (``now_ns`` less the monotonic time), or for those that would end after this read (another host's clock), a
    second group whose offset anchors their end at ``mtime_ns`` (the files' mtime; 0: never); with each request's
    (first, last) time (None: no timestamps)."""
    late = now_ns + 2_000_000_000 - mono_ns
    split: tuple[tuple[list[Request], list[Bounds]], ...] = (([], []), ([], []))  # ours, foreign
    for q in reqs:
        v = q.stamps.values()
        b = (min(v), max(v)) if v else None
        qs, bs = split[bool(mtime_ns) and (b[1] if b else 0) > late]
        qs.append(q)
        bs.append(b)
    (ours, ours_b), (foreign, foreign_b) = split
    out = [(ours, mono_ns, ours_b)]
    if foreign:
        out.append((foreign, mtime_ns - max(b[1] if b else 0 for b in foreign_b), foreign_b))
    return out


def _digest(key: str, n: int) -> bytes:
    return _blake2b(key.encode(), digest_size=n).digest()


# Fresh hash states to copy: a copy costs about half a new ``blake2b`` (its parameter block parsed and set up
# once here), and a span id's state after the trace's hex id is shared by its three suffixes. Same digests.
_B16 = _blake2b(digest_size=16)
_B8 = _blake2b(digest_size=8)


def span_records(reqs: Sequence[Request], offset_ns: int, path: str) -> list[Record]:
    """Span records (``sidecar.records``, JSON form: no ``Span`` object is built until someone reads one) for
    requests (callers check ``plausible`` first); ``offset_ns`` maps Triton's ``ns`` to Unix time.

    Per request: an ``InferRequest`` root when it has frontend events, the model span when it has REQUEST or
    QUEUE events, and ``compute`` under the model span (or the root); each span's events in time order (ties
    by name), its start and end its first and last event. (A decoupled model's request also gets an
    ``llm_request`` span: ``stream_records``.) ``sidecar.records.to_span`` of each record is the
    ``Span`` this module built before (tests/sources/test_trace_files_differential.py holds it to that).
    """
    out: list[Record] = []
    append = out.append
    group_of = _GROUP.get
    at_path = _B16.copy()  # the trace id's state after "<path>|"
    at_path.update(f"{path}|".encode())
    new16, new8 = at_path.copy, _B8.copy
    # A model's and version's attribute pairs and (model, version) tuple, made once a call and shared by its
    # model spans (equal values; fewer tuples for the collector to count and scan).
    shared: dict[tuple[str, str], tuple[tuple[str, str], tuple[str, str], tuple[str, str]]] = {}
    for q in reqs:
        s = q.stamps
        if not s:
            continue
        # One sort of all the request's events; each span takes its own in that order.
        req_ev: dict[str, int] = {}
        model_ev: dict[str, int] = {}
        comp_ev: dict[str, int] = {}
        groups = (req_ev, model_ev, comp_ev)
        get = s.__getitem__
        # Names in (time, name) order: sorted by name, then stably by time (no tuple a timestamp).
        names = sorted(sorted(s), key=get)
        first = get(names[0])
        for n in names:
            g = group_of(n)
            if g is not None:
                groups[g][n] = get(n) + offset_ns
        h = new16()
        h.update(b"%d|%d" % (q.tid, first))
        trace = h.digest()
        under = new8()  # the state after "<hex trace id>", each span id's "|suffix" added to a copy
        under.update(_hexlify(trace))
        root: bytes | None = None
        if req_ev:
            h = under.copy()
            h.update(b"|req")
            root = h.digest()
            v = [*req_ev.values()]
            t0, t1 = v[0], v[-1]
            append((trace, root, None, ROOT_NAME, t0, t1, 0, None, req_ev, SERVICE, FMT_JSON, _NO_ATTRS))
        h = under.copy()
        h.update(b"|model")
        model_id = h.digest()
        if model_ev:
            rid = q.request_id
            mv = (q.model, q.version)
            got = shared.get(mv)
            if got is None:
                got = shared[mv] = (("triton.model_name", mv[0]), ("triton.model_version", mv[1]), mv)
            pm, pv, mv = got
            attrs: tuple[tuple[str, object], ...] = (
                (pm, pv, ("triton.trace_id", q.tid), ("triton.request_id", rid))
                if rid
                else (pm, pv, ("triton.trace_id", q.tid))
            )
            v = [*model_ev.values()]
            t0, t1 = v[0], v[-1]
            append(
                (
                    trace,
                    model_id,
                    root,
                    q.model or "model",
                    t0,
                    t1,
                    0,
                    mv,
                    model_ev,
                    SERVICE,
                    FMT_JSON,
                    (attrs, "", 2),
                )
            )
        if comp_ev:
            v = [*comp_ev.values()]
            t0, t1 = v[0], v[-1]
            parent = model_id if model_ev else root
            h = under.copy()
            h.update(b"|compute")
            cid = h.digest()
            append((trace, cid, parent, "compute", t0, t1, 0, None, comp_ev, SERVICE, FMT_JSON, _NO_ATTRS))
    return out


def whole_of(reqs: Sequence[Request], offset_ns: int, path: str) -> tuple[list[tuple[bytes, int, int] | None], int]:
    """Per request, ``SpanRequests.whole``: (trace id, first, last time in Unix ns) when ``span_records`` makes
    exactly its three spans, root, model span and ``compute``, with every one of its events on them (each name one
    of Triton's, at least one of each span's); else None. The trace id is the one ``span_records`` gives it. With
    how many spans ``span_records`` makes of them all."""
    at_path = _B16.copy()
    at_path.update(f"{path}|".encode())
    new16 = at_path.copy
    known, req, model, compute = _KNOWN, _REQ, _MODEL, _COMPUTE
    out: list[tuple[bytes, int, int] | None] = []
    append = out.append
    spans = 0
    for q in reqs:
        s = q.stamps
        k = s.keys()
        has = (not k.isdisjoint(req)) + (not k.isdisjoint(model)) + (not k.isdisjoint(compute))
        spans += has
        if has == 3 and k <= known:
            v = s.values()
            first = min(v)
            h = new16()
            h.update(b"%d|%d" % (q.tid, first))
            append((h.digest(), first + offset_ns, max(v) + offset_ns))
        else:
            append(None)
    return out, spans


def stream_records(reqs: list[Request], offset_ns: int, path: str, empty_final: bool = False) -> list[Record]:
    """An ``llm_request`` span (``streams``) for each request with more than one response (a decoupled
    model's), under the request's root span of ``span_records`` (the model span without one); ``empty_final``:
    the last response of each stream was an empty final one."""
    out: list[Record] = []
    for q in reqs:
        if q.repeats is None:
            continue
        fig = stream_figures(q, empty_final)
        if fig is not None:
            out.append(_stream_record(q, fig, offset_ns, path))
    return out


def _stream_record(q: Request, fig: StreamFigures, offset_ns: int, path: str) -> Record:
    s = q.stamps
    trace = _digest(f"{path}|{q.tid}|{min(s.values())}", 16)
    hex_trace = trace.hex()
    if any(_GROUP.get(n) == 0 for n in s):
        parent: bytes | None = _digest(f"{hex_trace}|req", 8)
    else:
        parent = _digest(f"{hex_trace}|model", 8) if any(_GROUP.get(n) == 1 for n in s) else None
    attrs: tuple[tuple[str, object], ...] = (
        ("gen_ai.request.model", q.model),
        ("gen_ai.response.model", q.model),
        ("gen_ai.latency.time_to_first_token", fig.ttft_ns / 1e9),
        ("gen_ai.latency.e2e", fig.e2e_ns / 1e9),
        ("gen_ai.usage.output_tokens", len(fig.responses)),
        ("triton.model_name", q.model),
        ("triton.model_version", q.version),
        ("triton.trace_id", q.tid),
        ("triton.response_count", fig.written),
    )
    if q.request_id:
        attrs += (("triton.request_id", q.request_id),)
    events = [("response", t + offset_ns, ()) for t in fig.responses]
    sid = _digest(f"{hex_trace}|stream", 8)
    start, end = fig.received_ns + offset_ns, fig.responses[-1] + offset_ns
    return (trace, sid, parent, SPAN_NAME, start, end, 0, None, events, SERVICE, FMT_JSON, (attrs, "", 2))


def records_to_spans(reqs: list[Request], offset_ns: int, path: str) -> list[Span]:
    """The same spans as frozen ``Span`` objects (tests, tools); the source publishes ``span_records``."""
    return [to_span(r) for r in span_records(reqs, offset_ns, path)]
