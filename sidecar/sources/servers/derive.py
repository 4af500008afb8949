"""Derives interval SLIs from consecutive serving snapshots; knows the schema, never a server.

Every cumulative figure (requests by outcome, token and preemption counters, a distribution's sum, count and
buckets) is differenced the way Prometheus' ``rate()`` does it, as the Triton path does: a value below the
previous one is a reset (a server restart), and the increase is the new value itself; a model absent from the
previous good scrape counts from zero. Reset-corrected totals are kept so the exported ``*_total`` never go
backwards, and a model that goes and comes back continues its totals (bounded, oldest forgotten first).
"""

from __future__ import annotations

import math
from collections import OrderedDict
from dataclasses import dataclass, field

from sidecar.sources.servers.schema import Dist, ModelKey, ModelServing, ServingSnapshot

__all__ = ["QUANTILES", "Derived", "ServingDeriver", "quantile"]

QUANTILES = (0.5, 0.95, 0.99)


@dataclass
class Derived:
    """One model/version over the last scrape interval."""

    rates: dict[str, float] = field(default_factory=dict)  # requests by outcome and counters, per second
    error_ratio: float | None = None  # failure / all finished, over the interval
    stats: dict[str, dict[str, float]] = field(default_factory=dict)  # dist -> {"avg", "p50", "p95", "p99"}
    gauges: dict[str, float] = field(default_factory=dict)


def quantile(q: float, buckets: list[tuple[float, float]]) -> float | None:
    """``histogram_quantile`` over (upper bound, cumulative count) pairs, linear within a bucket."""
    if not buckets or buckets[-1][1] <= 0:
        return None
    rank = q * buckets[-1][1]
    lower, below = 0.0, 0.0
    for bound, cum in buckets:
        if cum >= rank:
            if math.isinf(bound):
                return lower  # in the open top bucket: its lower edge, as Prometheus does
            if cum == below:
                return bound
            return lower + (bound - lower) * (rank - below) / (cum - below)
        lower, below = bound, cum
    return None


def _inc(new: float, old: float | None) -> tuple[float, bool]:
    """(increase, reset) of one cumulative series; ``old`` None: counted from zero."""
    if old is None:
        return new, False
    if new < old:
        return new, True
    return new - old, False


class ServingDeriver:
    def __init__(self, max_models: int = 500) -> None:
        self.max_models = max_models
        self._prev: ServingSnapshot | None = None
        self._totals: dict[ModelKey, dict[str, float]] = {}
        self._dormant: OrderedDict[ModelKey, dict[str, float]] = OrderedDict()
        self.derived: dict[ModelKey, Derived] = {}
        self.current: dict[ModelKey, ModelServing] = {}
        self.resets = 0
        self.fresh = False

    def totals(self, key: ModelKey) -> dict[str, float]:
        return self._totals.get(key, {})

    def totals_items(self) -> list[tuple[ModelKey, dict[str, float]]]:
        """Reset-corrected totals of the models the last good scrape held."""
        return [(k, dict(v)) for k, v in list(self._totals.items())]  # copies: /metrics reads beside a scrape

    def mark_stale(self) -> None:
        """A scrape failed: interval values are withdrawn; the next good scrape derives over the whole gap."""
        self.fresh = False
        self.derived = {}

    def update(self, snap: ServingSnapshot) -> None:
        prev = self._prev
        dt = snap.taken_at - prev.taken_at if prev is not None else 0.0
        derived: dict[ModelKey, Derived] = {}
        for key, now in snap.models.items():
            totals = self._totals.get(key)
            if totals is None:
                totals = self._totals[key] = self._dormant.pop(key, {})
            old = prev.models.get(key) if prev is not None else None
            d = self._one(now, old, totals, known=prev is not None)
            if prev is not None and dt > 0:
                derived[key] = self._rates(d, now, dt)
        for gone in [k for k in self._totals if k not in snap.models]:
            self._dormant[gone] = self._totals.pop(gone)
            while len(self._dormant) > self.max_models:
                self._dormant.popitem(last=False)
        self._prev = snap
        self.current = dict(snap.models)
        self.derived = derived
        self.fresh = True

    def _one(
        self, now: ModelServing, old: ModelServing | None, totals: dict[str, float], *, known: bool
    ) -> dict[str, object]:
        """Increases over the interval, keyed like the totals; totals advanced in place."""
        incs: dict[str, object] = {}
        scalars = [(f"requests:{o}", v, old.requests.get(o) if old else None) for o, v in now.requests.items()]
        scalars += [(f"counter:{c}", v, old.counters.get(c) if old else None) for c, v in now.counters.items()]
        for name, v, o in scalars:
            inc, reset = _inc(v, o)
            self.resets += reset
            if known:
                totals[name] = totals.get(name, 0.0) + inc
                incs[name] = inc
        for name, dist in now.dists.items():
            od = old.dists.get(name) if old else None
            reset = od is not None and dist.count < od.count
            self.resets += reset
            base = None if (od is None or reset) else od
            dcount = dist.count - (base.count if base else 0.0)
            dsum = dist.sum - (base.sum if base else 0.0)
            if known:
                totals[f"dist_count:{name}"] = totals.get(f"dist_count:{name}", 0.0) + dcount
                totals[f"dist_sum:{name}"] = totals.get(f"dist_sum:{name}", 0.0) + dsum
                incs[f"dist:{name}"] = (dsum, dcount, _bucket_delta(dist, base))
        return incs

    @staticmethod
    def _rates(incs: dict[str, object], now: ModelServing, dt: float) -> Derived:
        d = Derived(gauges=dict(now.gauges))
        for name, val in incs.items():
            kind, _, sli = name.partition(":")
            if kind in ("requests", "counter") and isinstance(val, float):
                d.rates[name if kind == "requests" else sli] = val / dt
            elif kind == "dist" and isinstance(val, tuple):
                dsum, dcount, buckets = val
                if dcount > 0:
                    st = d.stats[sli] = {"avg": dsum / dcount}
                    for q in QUANTILES:
                        got = quantile(q, buckets) if buckets else None
                        if got is not None:
                            st[f"p{round(q * 100)}"] = got
        finished = {o: v for o, v in incs.items() if o.startswith("requests:") and isinstance(v, float)}
        done = sum(v for o, v in finished.items() if o != "requests:aborted")
        if done > 0 and "requests:failure" in finished:  # a server without a failure count has no error ratio
            d.error_ratio = finished.get("requests:failure", 0.0) / done
        return d


def _bucket_delta(dist: Dist, base: Dist | None) -> list[tuple[float, float]]:
    if not dist.buckets:
        return []
    if base is None:
        return list(dist.buckets)
    before = dict(base.buckets)
    if set(before) != {b for b, _ in dist.buckets}:
        return []  # the bucket layout changed (a restart with other buckets): no quantile this interval
    return [(b, c - before[b]) for b, c in dist.buckets]
