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
from operator import itemgetter

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
_CLASSES = ("1xx", "2xx", "3xx", "4xx", "5xx", "other")
_CACHE = ("hit", "miss", "none")
_HIT, _NONE = _CACHE.index("hit"), _CACHE.index("none")


def _tally(keys: np.ndarray, size: int) -> tuple[list[int], list[int]]:
    """(distinct keys, their counts) of non-negative integer keys below ``size``: a ``bincount`` while the key
    space is small against the keys, else a sort (``np.unique``)."""
    if size <= max(65_536, 4 * len(keys)):
        counts = np.bincount(keys, minlength=size)
        nz = np.flatnonzero(counts)
        return nz.tolist(), counts[nz].tolist()
    uniq, counts = np.unique(keys, return_counts=True)
    return uniq.tolist(), counts.tolist()


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
        # Small integer codes (for numpy keys): group and node names, and what maps to them.
        self._gnames: list[str] = []
        self._gid: dict[str, int] = {}
        self._nnames: list[str] = []
        self._nid: dict[str, int] = {}
        self._path_gcode: dict[str, int] = {}  # path -> group code, for lines with no route
        self._route_gcode: dict[tuple[str, str], int] = {}  # (path, the edge's route) -> group code
        self._node_code: dict[str, int] = {}  # tracked nodes -> code
        self._cache_code: dict[str, int] = {}  # cache status -> index in _CACHE
        self._status_code: dict[int, int] = {}  # HTTP status -> index in _CLASSES
        self._groups: set[str] = {g.name for g in cfg.route_groups}
        self._nodes: set[str] = set()
        self.requests: Tally[tuple[str, str, str, str]] = Tally()
        self.origin_requests: Tally[tuple[str, str]] = Tally()
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
        """The group of a (path, route) seen for the first time (``_group_code`` keeps the answer)."""
        g = next((name for p, name in self._prefixes if path.startswith(p)), None)
        if g is None:
            g = next((name for rx, name in self._regexes if rx.search(path)), None)
        if g is None and route is not None:
            if route in self._groups or (len(self._groups) < self.cfg.max_groups and route not in (ALL, OTHER)):
                self._groups.add(route)
                g = route
            else:
                self.dropped.labels("group_overflow").inc()
        return g or OTHER

    def _node(self, node: str) -> int:
        """The code of a node the batch's look-up missed: tracked up to ``max_nodes``, past it ``other``."""
        code = self._node_code.get(node)
        if code is not None:  # tracked by an earlier line of the same batch
            return code
        if len(self._nodes) < self.cfg.max_nodes:
            self._nodes.add(node)
            code = self._node_code[node] = self._code(node, self._nnames, self._nid)
            return code
        self.dropped.labels("node_overflow").inc()
        return self._code(OTHER, self._nnames, self._nid)

    def cache_result(self, cache: str) -> str:
        if cache in self._hit:
            return "hit"
        return "none" if cache in self._excluded else "miss"

    # ---- intake ---------------------------------------------------------------------------------------------
    def observe(self, records: Sequence[EdgeRecord]) -> None:
        """Columnar and numeric: each column taken with ``map`` in C, names turned into small integer codes
        through dicts (a Python step only for a name not seen before), then every count is a ``np.bincount`` (or
        ``np.unique``) over combined codes; Python loops run only over the distinct keys (bench/bench_edge.py)."""
        if not records:
            return
        n = len(records)
        ats, paths, caches, edges, origins, statuses, raw_nodes, routes = (
            list(map(itemgetter(i), records)) for i in (0, 1, 2, 3, 4, 5, 6, 9)
        )
        with self._lock:
            if routes.count(None) == n:
                gl = list(map(self._path_gcode.get, paths))
            else:
                pg, po = self._route_gcode, self._path_gcode
                gl = [po.get(p) if r is None else pg.get((p, r)) for p, r in zip(paths, routes, strict=True)]
            if None in gl:
                gl = [self._group_code(paths[i], routes[i]) if c is None else c for i, c in enumerate(gl)]
            nl = list(map(self._node_code.get, raw_nodes))
            if None in nl:
                nl = [self._node(raw_nodes[i]) if c is None else c for i, c in enumerate(nl)]
            cl = list(map(self._cache_code.get, caches))
            if None in cl:
                cl = [self._classify(caches[i]) if c is None else c for i, c in enumerate(cl)]
            sl = list(map(self._status_code.get, statuses))
            if None in sl:
                sl = [self._status(statuses[i]) if c is None else c for i, c in enumerate(sl)]
            g = np.fromiter(gl, dtype=np.int64, count=n)
            nd = np.fromiter(nl, dtype=np.int64, count=n)
            cr = np.fromiter(cl, dtype=np.int64, count=n)
            gn = g * len(self._nnames) + nd
            self._count_requests((gn * len(_CACHE) + cr) * len(_CLASSES) + np.fromiter(sl, np.int64, count=n))
            minutes = (np.array(ats, dtype=np.float64) // 60).astype(np.int64)
            m0 = int(minutes.min())
            mrel = minutes - m0
            span = int(mrel.max()) + 1
            self._add_counts(g, mrel, m0, span, cr)
            for hop, col in (("edge", edges), ("origin", origins)):
                arr = np.array(col, dtype=np.float64)  # None (no such hop) reads as NaN
                ok = ~np.isnan(arr)
                if not ok.all():
                    if not ok.any():
                        continue
                    sel = np.flatnonzero(ok)
                    self._add_latency(hop, arr[sel], g[sel], gn[sel], mrel[sel], m0, span)
                else:
                    self._add_latency(hop, arr, g, gn, mrel, m0, span)

    def _group_code(self, path: str, route: str | None) -> int:
        known = self._path_gcode.get(path) if route is None else self._route_gcode.get((path, route))
        if known is not None:  # found by an earlier line of the same batch
            return known
        code = self._code(self._group(path, route), self._gnames, self._gid)
        if route is None:
            if len(self._path_gcode) >= _MAX_PATH_CACHE:
                self._path_gcode.clear()
            self._path_gcode[path] = code
        else:
            if len(self._route_gcode) >= _MAX_PATH_CACHE:
                self._route_gcode.clear()
            self._route_gcode[(path, route)] = code
        return code

    @staticmethod
    def _code(name: str, names: list[str], index: dict[str, int]) -> int:
        code = index.get(name)
        if code is None:
            code = index[name] = len(names)
            names.append(name)
        return code

    def _classify(self, cache: str) -> int:
        if len(self._cache_code) >= 1024:
            self._cache_code.clear()
        out = self._cache_code[cache] = _CACHE.index(self.cache_result(cache))
        return out

    def _status(self, status: int) -> int:
        out = self._status_code[status] = _CLASSES.index(_STATUS_CLASS.get(status // 100, "other"))
        return out

    def _count_requests(self, keys: np.ndarray) -> None:
        nn, nc, ns = len(self._nnames), len(_CACHE), len(_CLASSES)
        for k, c in zip(*_tally(keys, len(self._gnames) * nn * nc * ns), strict=True):
            k, s = divmod(k, ns)
            k, c_ = divmod(k, nc)
            gi, ni = divmod(k, nn)
            self.requests[(self._gnames[gi], self._nnames[ni], _CACHE[c_], _CLASSES[s])] += c

    def _add_counts(self, g: np.ndarray, mrel: np.ndarray, m0: int, span: int, cr: np.ndarray) -> None:
        in_ratio: dict[tuple[int, int], int] = {}
        hits: dict[tuple[int, int], int] = {}
        nc = len(_CACHE)
        for k, c in zip(*_tally((g * span + mrel) * nc + cr, len(self._gnames) * span * nc), strict=True):
            k, c_ = divmod(k, nc)
            if c_ != _NONE:
                gi, m = divmod(k, span)
                key = (gi, m + m0)
                in_ratio[key] = in_ratio.get(key, 0) + c
                if c_ == _HIT:
                    hits[key] = c
        too_old = 0
        for (gi, minute), total in in_ratio.items():
            for name in (self._gnames[gi], ALL):
                ring = self._counts.get(name)
                if ring is None:
                    ring = self._counts[name] = CountRing(self._count_minutes)
                if not ring.add(minute, total, hits.get((gi, minute), 0)) and name != ALL:
                    too_old += total
        if too_old:
            self.dropped.labels("too_old").inc(too_old)

    def _add_latency(
        self, hop: str, arr: np.ndarray, g: np.ndarray, gn: np.ndarray, mrel: np.ndarray, m0: int, span: int
    ) -> None:
        # Sketches per (group, minute), and per (all, minute).
        bins = bins_of(arr)
        names = self._gnames
        for keys, size, name_of in (
            ((g * span + mrel) * NBINS + bins, len(names) * span * NBINS, names),
            (mrel * NBINS + bins, span * NBINS, None),
        ):
            per: dict[tuple[str, int], dict[int, int]] = {}
            for k, c in zip(*_tally(keys, size), strict=True):
                gm, b = divmod(k, NBINS)
                gi, m = divmod(gm, span)
                per.setdefault((ALL if name_of is None else name_of[gi], m + m0), {})[b] = c
            for (name, minute), hist in per.items():
                ring = self._lat.get((name, hop))
                if ring is None:
                    ring = self._lat[(name, hop)] = LatencyRing(self._lat_minutes)
                ring.add_counts(minute, hist)
        # Exported histograms per (group, node); origin requests (offload) per (group, node).
        nb = len(self._buckets) + 1
        nn = len(self._nnames)
        pairs = len(names) * nn
        buckets = np.bincount(gn * nb + np.searchsorted(self._buckets, arr, side="left"), minlength=pairs * nb)
        sums = np.bincount(gn, weights=arr, minlength=pairs)
        counts = np.bincount(gn, minlength=pairs)
        for i in np.flatnonzero(counts).tolist():
            gi, ni = divmod(i, nn)
            key = (names[gi], self._nnames[ni])
            if hop == "origin":
                self.origin_requests[key] += int(counts[i])
            slot = self._hist.get((*key, hop))
            if slot is None:
                slot = self._hist[(*key, hop)] = (np.zeros(nb, dtype=np.int64), [0.0])
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
