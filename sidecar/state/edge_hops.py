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
from collections import OrderedDict
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
        self._hops: OrderedDict[int, EdgeRecord] = OrderedDict()
        self._by_trace: dict[str, int] = {}
        self._by_request: dict[str, int] = {}
        self._seq = 0
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
        held.set_function(lambda: len(self._hops))

    def __len__(self) -> int:
        return len(self._hops)

    def observe(self, records: Sequence[EdgeRecord]) -> None:
        skipped = 0
        with self._lock:
            for r in records:
                t, q = r.trace_id, r.request_id
                if t is None and q is None:
                    skipped += 1
                    continue
                self._seq += 1
                seq = self._seq
                if t is not None:
                    self._replace(self._by_trace, t, seq)
                if q is not None:
                    self._replace(self._by_request, q, seq)
                self._hops[seq] = r
                self.bytes += hop_bytes(r)
            self._evict()
        if skipped:
            self._skipped.inc(skipped)

    def _replace(self, index: dict[str, int], key: str, seq: int) -> None:
        """The newest hop of a key wins; the one it replaces goes when no index points at it any more."""
        old = index.get(key)
        index[key] = seq
        if old is None:
            return
        r = self._hops.get(old)
        if r is None:
            return
        if self._by_trace.get(r.trace_id or "") != old and self._by_request.get(r.request_id or "") != old:
            del self._hops[old]
            self.bytes -= hop_bytes(r)

    def _evict(self) -> None:
        while self._hops and (len(self._hops) > self.cfg.max_hops or self.bytes > self.cfg.max_bytes):
            (self._ev_items if len(self._hops) > self.cfg.max_hops else self._ev_bytes).inc()
            seq, r = self._hops.popitem(last=False)
            self.bytes -= hop_bytes(r)
            if r.trace_id is not None and self._by_trace.get(r.trace_id) == seq:
                del self._by_trace[r.trace_id]
            if r.request_id is not None and self._by_request.get(r.request_id) == seq:
                del self._by_request[r.request_id]

    def find(self, trace_id: str | None, request_ids: Iterable[str] = ()) -> EdgeRecord | None:
        """The edge hop of a trace: by its W3C trace id first, else by the first request id a span carries."""
        with self._lock:
            if trace_id is not None and (seq := self._by_trace.get(trace_id.lower())) is not None:
                return self._hops[seq]
            for q in request_ids:
                if (seq := self._by_request.get(q)) is not None:
                    return self._hops[seq]
        return None

    def find_for_spans(self, trace_id: str, attributes: Iterable[Mapping[str, object]]) -> EdgeRecord | None:
        return self.find(trace_id, request_ids_of(attributes, self.cfg.request_id_attributes))
