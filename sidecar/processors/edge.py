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
from collections import Counter as Tally
from collections.abc import Iterator, Sequence

import numpy as np
from prometheus_client import CollectorRegistry, Counter
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, HistogramMetricFamily, Metric
from prometheus_client.registry import Collector

from sidecar.clock import Clock
from sidecar.component import Passive, Role
from sidecar.processors.edge_config import ALL, OTHER, EdgeSeriesConfig
from sidecar.processors.edge_record import EdgeRecord
from sidecar.processors.edge_window import NBINS, CountRing, LatencyRing, bins_of, quantile

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
        self.requests: Tally[tuple[str, str, str, str]] = Tally()
        self.origin_requests: Tally[tuple[str, str]] = Tally()
        self._classes: dict[str, str] = {}
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
        """Columnar: one pass per column, then counting in C (``collections.Counter``) and numpy, so the cost
        per line is a few list-comprehension steps (bench/bench_edge.py)."""
        if not records:
            return
        with self._lock:
            pg, group = self._path_group, self._group
            groups = [pg.get((r.path, r.route)) or group(r.path, r.route) for r in records]
            known = self._nodes
            nodes = [r.node if r.node in known else self._node(r.node) for r in records]
            classes = self._classes
            crs = [classes.get(r.cache) or self._classify(r.cache) for r in records]
            sc = _STATUS_CLASS
            self.requests.update(
                zip(groups, nodes, crs, [sc.get(r.status // 100, "other") for r in records], strict=True)
            )
            minutes = [int(r.at // 60) for r in records]
            gm = list(zip(groups, minutes, strict=True))
            in_ratio = Tally(k for k, c in zip(gm, crs, strict=True) if c != "none")
            hits = Tally(k for k, c in zip(gm, crs, strict=True) if c == "hit")
            self._add_counts(in_ratio, hits)
            gn = list(zip(groups, nodes, strict=True))
            for hop, values in (("edge", [r.edge_s for r in records]), ("origin", [r.origin_s for r in records])):
                idx = [i for i, v in enumerate(values) if v is not None]
                if idx:
                    if hop == "origin":
                        self.origin_requests.update(gn[i] for i in idx)
                    arr = np.fromiter((values[i] for i in idx), dtype=np.float64, count=len(idx))
                    self._add_latency(hop, arr, [gm[i] for i in idx], [gn[i] for i in idx])

    def _classify(self, cache: str) -> str:
        if len(self._classes) >= 1024:
            self._classes.clear()
        out = self._classes[cache] = self.cache_result(cache)
        return out

    def _add_counts(self, in_ratio: Tally[tuple[str, int]], hits: Tally[tuple[str, int]]) -> None:
        too_old = 0
        for (g, minute), total in in_ratio.items():
            for name in (g, ALL):
                ring = self._counts.get(name)
                if ring is None:
                    ring = self._counts[name] = CountRing(self._count_minutes)
                if not ring.add(minute, total, hits.get((g, minute), 0)) and name == g:
                    too_old += total
        if too_old:
            self.dropped.labels("too_old").inc(too_old)

    def _add_latency(self, hop: str, arr: np.ndarray, gm: list[tuple[str, int]], gn: list[tuple[str, str]]) -> None:
        # Sketches per (group, minute), and per (all, minute).
        bins = bins_of(arr)
        for keys in (gm, [(ALL, m) for _, m in gm]):
            codes = {k: i for i, k in enumerate(dict.fromkeys(keys))}
            code = np.fromiter((codes[k] for k in keys), dtype=np.int64, count=len(keys))
            uniq, counts = np.unique(code * NBINS + bins, return_counts=True)
            names = list(codes)
            per: dict[tuple[str, int], dict[int, int]] = {}
            for u, c in zip(uniq.tolist(), counts.tolist(), strict=True):
                per.setdefault(names[u // NBINS], {})[u % NBINS] = c
            for (g, minute), hist in per.items():
                ring = self._lat.get((g, hop))
                if ring is None:
                    ring = self._lat[(g, hop)] = LatencyRing(self._lat_minutes)
                ring.add_counts(minute, hist)
        # Exported histograms per (group, node).
        nb = len(self._buckets) + 1
        codes2 = {k: i for i, k in enumerate(dict.fromkeys(gn))}
        code2 = np.fromiter((codes2[k] for k in gn), dtype=np.int64, count=len(gn))
        n = len(codes2)
        buckets = np.bincount(code2 * nb + np.searchsorted(self._buckets, arr, side="left"), minlength=n * nb)
        sums = np.bincount(code2, weights=arr, minlength=n)
        for (g, node), i in codes2.items():
            slot = self._hist.get((g, node, hop))
            if slot is None:
                slot = self._hist[(g, node, hop)] = (np.zeros(nb, dtype=np.int64), [0.0])
            bucket_counts, total = slot
            bucket_counts += buckets[i * nb : (i + 1) * nb]
            total[0] += float(sums[i])

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
