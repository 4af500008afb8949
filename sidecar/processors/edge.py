"""Derives the edge series from edge log records: per route group and edge node, requests by cache result and
status class, origin requests (so origin offload), and edge and origin latency histograms; per route group,
per-minute hit counts (the SLA check's input) and latency sketches (p50, p99, p99.9 over a window, the tail
check's input).

Bounded: at most ``max_groups`` route groups and ``max_nodes`` nodes (the rest fold into ``other``, counted in
``sidecar_edge_series_dropped_total{reason}``), per-minute rings of fixed length (a line older than its ring is
dropped and counted). Exported through a custom collector, so a scrape reads the state as it is.
"""

from __future__ import annotations

import re
import threading
from collections.abc import Iterator, Sequence

import numpy as np
from prometheus_client import CollectorRegistry, Counter
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, HistogramMetricFamily, Metric
from prometheus_client.registry import Collector

from sidecar.clock import Clock
from sidecar.component import Passive, Role
from sidecar.processors.edge_config import ALL, OTHER, EdgeSeriesConfig
from sidecar.processors.edge_record import EdgeRecord
from sidecar.processors.edge_window import CountRing, LatencyRing, bins_of, quantile

__all__ = ["HOPS", "QUANTILES", "EdgeProcessor"]

HOPS = ("edge", "origin")
QUANTILES = (0.5, 0.99, 0.999)
_MAX_PATH_CACHE = 65_536
_STATUS_CLASS = {1: "1xx", 2: "2xx", 3: "3xx", 4: "4xx", 5: "5xx"}


class EdgeProcessor(Passive, Collector):
    name = "edge_series"
    role = Role.PROCESSOR

    def __init__(self, cfg: EdgeSeriesConfig, *, registry: CollectorRegistry, clock: Clock) -> None:
        self.cfg = cfg
        self.clock = clock
        self._lock = threading.Lock()
        self._hit = frozenset(cfg.hit_statuses)
        self._excluded = frozenset(cfg.excluded_statuses)
        self._prefixes = [(p, g.name) for g in cfg.route_groups for p in g.prefixes]
        self._regexes = [(re.compile(g.regex), g.name) for g in cfg.route_groups if g.regex is not None]
        self._path_group: dict[tuple[str, str | None], str] = {}
        self._groups: set[str] = {g.name for g in cfg.route_groups}
        self._nodes: set[str] = set()
        self.requests: dict[tuple[str, str, str, str], int] = {}
        self.origin_requests: dict[tuple[str, str], int] = {}
        self._buckets = np.asarray(cfg.histogram_buckets, dtype=np.float64)
        self._hist: dict[tuple[str, str, str], tuple[np.ndarray, list[float]]] = {}
        self._count_minutes = int(cfg.count_history_secs // 60)
        self._lat_minutes = int(cfg.latency_history_secs // 60)
        self._counts: dict[str, CountRing] = {}
        self._lat: dict[tuple[str, str], LatencyRing] = {}
        self.dropped = Counter(
            "sidecar_edge_series_dropped",
            "Edge records folded or dropped by the processor's bounds (group_overflow, node_overflow: counted "
            "under `other`; too_old: older than the per-minute rings, left out of the hit ratio and sketches).",
            ["reason"],
            registry=registry,
        )
        registry.register(self)

    # ---- grouping -------------------------------------------------------------------------------------------
    def _group(self, path: str, route: str | None) -> str:
        key = (path, route)
        g = self._path_group.get(key)
        if g is not None:
            return g
        g = next((name for p, name in self._prefixes if path.startswith(p)), None)
        if g is None:
            g = next((name for rx, name in self._regexes if rx.search(path)), None)
        if g is None and route is not None:
            if route in self._groups or (len(self._groups) < self.cfg.max_groups and route not in (ALL, OTHER)):
                self._groups.add(route)
                g = route
            else:
                self.dropped.labels("group_overflow").inc()
        g = g or OTHER
        if len(self._path_group) >= _MAX_PATH_CACHE:
            self._path_group.clear()
        self._path_group[key] = g
        return g

    def _node(self, node: str) -> str:
        if node in self._nodes:
            return node
        if len(self._nodes) < self.cfg.max_nodes:
            self._nodes.add(node)
            return node
        self.dropped.labels("node_overflow").inc()
        return OTHER

    def cache_result(self, cache: str) -> str:
        if cache in self._hit:
            return "hit"
        return "none" if cache in self._excluded else "miss"

    # ---- intake ---------------------------------------------------------------------------------------------
    def observe(self, records: Sequence[EdgeRecord]) -> None:
        counts: dict[tuple[str, int], list[int]] = {}
        lat: dict[tuple[str, str, int], list[float]] = {}
        hist: dict[tuple[str, str, str], list[float]] = {}
        hit, excluded = self._hit, self._excluded
        requests, origin = self.requests, self.origin_requests
        with self._lock:
            for r in records:
                g = self._group(r.path, r.route)
                n = r.node if r.node in self._nodes else self._node(r.node)
                c = r.cache
                cr = "hit" if c in hit else ("none" if c in excluded else "miss")
                key = (g, n, cr, _STATUS_CLASS.get(r.status // 100, "other"))
                requests[key] = requests.get(key, 0) + 1
                minute = int(r.at // 60)
                if cr != "none":
                    acc = counts.get((g, minute))
                    if acc is None:
                        acc = counts[(g, minute)] = [0, 0]
                    acc[0] += 1
                    if cr == "hit":
                        acc[1] += 1
                if r.edge_s is not None:
                    lat.setdefault((g, "edge", minute), []).append(r.edge_s)
                    hist.setdefault((g, n, "edge"), []).append(r.edge_s)
                if r.origin_s is not None:
                    origin[(g, n)] = origin.get((g, n), 0) + 1
                    lat.setdefault((g, "origin", minute), []).append(r.origin_s)
                    hist.setdefault((g, n, "origin"), []).append(r.origin_s)
            self._apply(counts, lat, hist)

    def _apply(
        self,
        counts: dict[tuple[str, int], list[int]],
        lat: dict[tuple[str, str, int], list[float]],
        hist: dict[tuple[str, str, str], list[float]],
    ) -> None:
        too_old = 0
        for (g, minute), (total, hits) in counts.items():
            for name in (g, ALL):
                ring = self._counts.get(name)
                if ring is None:
                    ring = self._counts[name] = CountRing(self._count_minutes)
                if not ring.add(minute, total, hits) and name == g:
                    too_old += total
        for (g, hop, minute), values in lat.items():
            bins = bins_of(np.asarray(values, dtype=np.float64))
            for name in (g, ALL):
                lring = self._lat.get((name, hop))
                if lring is None:
                    lring = self._lat[(name, hop)] = LatencyRing(self._lat_minutes)
                lring.add(minute, bins)
        nb = len(self._buckets) + 1
        for key, values in hist.items():
            arr = np.asarray(values, dtype=np.float64)
            slot = self._hist.get(key)
            if slot is None:
                slot = self._hist[key] = (np.zeros(nb, dtype=np.int64), [0.0])
            bucket_counts, sums = slot
            bucket_counts += np.bincount(np.searchsorted(self._buckets, arr, side="left"), minlength=nb)
            sums[0] += float(arr.sum())
        if too_old:
            self.dropped.labels("too_old").inc(too_old)

    # ---- reads (checks, pages, tests) ----------------------------------------------------------------------
    def groups(self) -> list[str]:
        with self._lock:
            return sorted(self._counts)

    def hits(self, group: str, start: float, end: float) -> tuple[int, int]:
        """(hits, requests in the ratio) of ``group`` over whole minutes from ``start`` to ``end``."""
        with self._lock:
            ring = self._counts.get(group)
            return (0, 0) if ring is None else ring.window(int(start // 60), int(end // 60))

    def latency_quantiles(
        self, group: str, hop: str, start: float, end: float, qs: Sequence[float] = QUANTILES
    ) -> tuple[int, list[float | None]]:
        """(requests, the ``qs`` quantiles in seconds) of ``group``'s ``hop`` latency over whole minutes."""
        with self._lock:
            ring = self._lat.get((group, hop))
            if ring is None:
                return 0, [None for _ in qs]
            h = ring.window(int(start // 60), int(end // 60))
        return int(h.sum()), [quantile(h, q) for q in qs]

    # ---- export ---------------------------------------------------------------------------------------------
    def describe(self) -> list[Metric]:
        return []

    def collect(self) -> Iterator[Metric]:
        req = CounterMetricFamily(
            "sidecar_edge_requests",
            "Edge requests by route group, edge node, cache result (hit, miss, none: not in the hit ratio) and "
            "status class.",
            labels=["route_group", "edge_node", "cache", "status_class"],
        )
        org = CounterMetricFamily(
            "sidecar_edge_origin_requests",
            "Edge requests that went to the origin (origin offload = 1 - origin / all).",
            labels=["route_group", "edge_node"],
        )
        lat = HistogramMetricFamily(
            "sidecar_edge_latency_seconds",
            "Latency per hop: edge (the whole request at the edge) and origin (the edge's wait on the origin).",
            labels=["route_group", "edge_node", "hop"],
        )
        qg = GaugeMetricFamily(
            "sidecar_edge_latency_quantile_seconds",
            "p50, p99 and p99.9 of a hop's latency per route group over edge.series.quantile_window_secs "
            "(1% relative error).",
            labels=["route_group", "hop", "quantile"],
        )
        now = self.clock.now()
        end = (int(now // 60) + 1) * 60
        start = end - self.cfg.quantile_window_secs
        labels = [f"{b:g}" for b in self._buckets] + ["+Inf"]
        with self._lock:
            for (g, n, c, s), v in self.requests.items():
                req.add_metric([g, n, c, s], v)
            for (g, n), v in self.origin_requests.items():
                org.add_metric([g, n], v)
            for (g, n, hop), (bucket_counts, sums) in self._hist.items():
                cum = np.cumsum(bucket_counts).tolist()
                lat.add_metric([g, n, hop], list(zip(labels, cum, strict=True)), sums[0])
            keys = list(self._lat)
        for g, hop in keys:
            count, qv = self.latency_quantiles(g, hop, start, end)
            if count:
                for q, qval in zip(QUANTILES, qv, strict=True):
                    if qval is not None:
                        qg.add_metric([g, hop, f"{q:g}"], qval)
        yield from (req, org, lat, qg)
