"""The request join's path for a trace file's requests whole (``span_requests``, ``SpanRequests``).

A request read from Triton's trace files without a request id leaves the join at once with Triton's side alone
(``request_records``: nothing could join it). Its record needs only what ``finish`` reads of its spans: the model
and version (the model span's attributes, cut as ``request_sides.kept`` cuts them), the latency (the root span's
first to last event) and no failure (a trace file's spans carry no status). ``finished`` gives those records from
the request's event times, without building its spans; a request it cannot finish so (not whole, with a request
id, its trace read twice in the batch, or kept for the audit log, whose document reads the spans) goes to the
join as its span records, in order.
tests/processors/test_request_whole.py holds the records and counters to the span records' path.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence

from sidecar.model import SpanRequest, SpanRequests
from sidecar.processors.request_records_doc import Done, ms_of_ns, why_kept
from sidecar.processors.request_sides import KEPT_CHARS
from sidecar.records import TRACE, TRITON_REQUEST_EVENTS, Record

__all__ = ["finished"]


def finished(items: Sequence[SpanRequests], slow_ms: float, sample_rate: float) -> tuple[list[Done], list[Record]]:
    """(the finished records of the requests that leave at once and are not kept, the span records of the rest)."""
    done: list[Done] = []
    rest: list[Record] = []
    front = TRITON_REQUEST_EVENTS
    # A trace id twice in one batch (a request read again, or read in part and then whole) is one join of both
    # copies' spans: as span records. A request that is not whole (rare) is built here for its trace id.
    keys = [w[0] for item in items for w in item.whole if w is not None]
    keys += [
        r[TRACE]
        for i in items
        for q, w in zip(i.requests, i.whole, strict=True)
        if w is None
        for r in i.spans((q,))[:1]
    ]
    twice = {k for k, n in Counter(keys).items() if n > 1} if len(set(keys)) < len(keys) else set()
    for item in items:
        others: list[SpanRequest] = []
        for q, w in zip(item.requests, item.whole, strict=True):
            if w is None or q.request_id or (twice and w[0] in twice):
                others.append(q)
                continue
            get = q.stamps.get
            t = [x for x in map(get, front) if x is not None]  # a whole request has its root's events
            o = (
                w[0].hex(),
                None,
                q.model[:KEPT_CHARS],  # as ``kept`` cuts the model span's attributes (a shorter one is itself)
                q.version[:KEPT_CHARS],
                "ok",
                None,
                None,
                None,
                ms_of_ns(max(t) - min(t)),
                None,
            )
            if why_kept(o, slow_ms, sample_rate) is not None:
                others.append(q)
                continue
            done.append(o)
        if others:
            rest += item.spans(others)
    return done, rest
