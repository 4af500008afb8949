"""Recent edge hops, kept so the trace page can put the edge in front of the model's spans.

An edge log line and the model server's spans of the same request join when they share a W3C trace id, or when
a span carries the request id the edge logged (``edge.join.request_id_attributes``). A request id of any width
or form (an edge's 16-hex id, a 20-character opaque id, CloudFront's 56-character id) is a key as it is: never
refused for its length.

Bounded by an item and a byte budget: the oldest hop goes first, counted in
``sidecar_edge_hops_evicted_total{reason}`` (``items``, ``bytes``); a line with neither id cannot join and is
counted in ``sidecar_edge_hops_skipped_total``. Fed by the edge sources like the processor (an ``EdgeSink``,
handed over by wiring, not through the bus), read by the trace page.
"""

from __future__ import annotations

import threading
from collections import deque
from collections.abc import Iterable, Mapping, Sequence

from prometheus_client import CollectorRegistry, Counter, Gauge

from sidecar.component import Passive, Role
from sidecar.processors.edge_record import EdgeRecord
from sidecar.state.edge_join_config import EdgeJoinConfig

__all__ = ["EdgeHops", "EdgeJoinConfig", "hop_bytes", "request_ids_of"]

_OVERHEAD = 240  # a record tuple, its floats and the index entries, roughly, in bytes


def hop_bytes(r: EdgeRecord) -> int:
    return _OVERHEAD + len(r.path) + len(r.node) + len(r.cache) + len(r.trace_id or "") + len(r.request_id or "")


def request_ids_of(attributes: Iterable[Mapping[str, object]], names: Sequence[str], limit: int = 64) -> list[str]:
    """The request ids the given attribute names carry in these attribute maps, in order, without repeats."""
    out: list[str] = []
    for attrs in attributes:
        for n in names:
            v = attrs.get(n)
            if isinstance(v, list | tuple) and v:
                v = v[0]
            if isinstance(v, str) and v and v not in out:
                out.append(v)
                if len(out) >= limit:
                    return out
    return out


class EdgeHops(Passive):
    name = "edge_hops"
    role = Role.SINK

    def __init__(self, cfg: EdgeJoinConfig, *, registry: CollectorRegistry) -> None:
        self.cfg = cfg
        self._lock = threading.Lock()
        self._queue: deque[tuple[EdgeRecord, int]] = deque()  # (hop, its size), oldest first
        self._by_trace: dict[str, EdgeRecord] = {}
        self._by_request: dict[str, EdgeRecord] = {}
        self.bytes = 0
        self._evicted = Counter(
            "sidecar_edge_hops_evicted",
            "Edge hops evicted from the join store, by budget.",
            ["reason"],
            registry=registry,
        )
        self._ev_items = self._evicted.labels("items")
        self._ev_bytes = self._evicted.labels("bytes")
        self._skipped = Counter(
            "sidecar_edge_hops_skipped",
            "Edge lines not kept for the join: neither a trace id nor a request id.",
            registry=registry,
        )
        held = Gauge("sidecar_edge_hops_held", "Edge hops held for the join with spans.", registry=registry)
        held.set_function(lambda: len(self._queue))

    def __len__(self) -> int:
        return len(self._queue)

    def observe(self, records: Sequence[EdgeRecord]) -> None:
        """On the edge sources' hot path: inlined, sizes kept beside the hops, counters moved once a call. A hop
        whose ids a newer hop took over stays in the queue (and the budget) until its turn to go."""
        skipped = 0
        queue, by_trace, by_request = self._queue, self._by_trace, self._by_request
        with self._lock:
            held = self.bytes
            for r in records:
                t, q = r.trace_id, r.request_id
                if t is None and q is None:
                    skipped += 1
                    continue
                size = _OVERHEAD + len(r.path) + len(r.node) + len(r.cache) + len(t or "") + len(q or "")
                if t is not None:
                    by_trace[t] = r
                if q is not None:
                    by_request[q] = r
                queue.append((r, size))
                held += size
            self.bytes = held
            by_items, by_bytes = self._evict()
        if skipped:
            self._skipped.inc(skipped)
        if by_items:
            self._ev_items.inc(by_items)
        if by_bytes:
            self._ev_bytes.inc(by_bytes)

    def _evict(self) -> tuple[int, int]:
        queue, by_trace, by_request = self._queue, self._by_trace, self._by_request
        max_hops, max_bytes = self.cfg.max_hops, self.cfg.max_bytes
        by_items = by_bytes = 0
        while queue and (len(queue) > max_hops or self.bytes > max_bytes):
            if len(queue) > max_hops:
                by_items += 1
            else:
                by_bytes += 1
            r, size = queue.popleft()
            self.bytes -= size
            if (t := r.trace_id) is not None and by_trace.get(t) is r:
                del by_trace[t]
            if (q := r.request_id) is not None and by_request.get(q) is r:
                del by_request[q]
        return by_items, by_bytes

    def find(self, trace_id: str | None, request_ids: Iterable[str] = ()) -> EdgeRecord | None:
        """The edge hop of a trace: by its W3C trace id first, else by the first request id a span carries."""
        with self._lock:
            if trace_id is not None and (r := self._by_trace.get(trace_id.lower())) is not None:
                return r
            for q in request_ids:
                if (r := self._by_request.get(q)) is not None:
                    return r
        return None

    def find_for_spans(self, trace_id: str, attributes: Iterable[Mapping[str, object]]) -> EdgeRecord | None:
        return self.find(trace_id, request_ids_of(attributes, self.cfg.request_id_attributes))
