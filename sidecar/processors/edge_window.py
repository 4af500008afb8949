"""The edge processor's bounded per-minute state: request and hit counts in a ring of minutes, and latency
sketches (log-bucketed histograms with a 1% relative error at every quantile, the DDSketch idea) in a shorter
ring. Minutes outside a ring are refused (the caller counts them)."""

from __future__ import annotations

import math

import numpy as np

__all__ = ["GAMMA", "CountRing", "LatencyRing", "quantile"]

GAMMA = 1.02  # bucket i holds (MIN_S * GAMMA**(i-1), MIN_S * GAMMA**i]: any quantile within 1%
MIN_S = 1e-5
MAX_S = 3600.0
_LOG_GAMMA = math.log(GAMMA)
NBINS = math.ceil(math.log(MAX_S / MIN_S) / _LOG_GAMMA) + 2


def bins_of(values: np.ndarray) -> np.ndarray:
    clipped = np.clip(values, MIN_S, MAX_S)
    return np.ceil(np.log(clipped / MIN_S) / _LOG_GAMMA).astype(np.int64)


def quantile(hist: np.ndarray, q: float) -> float | None:
    """The ``q`` quantile of a bucket histogram (the geometric middle of its bucket), None when empty."""
    total = int(hist.sum())
    if total == 0:
        return None
    rank = max(1, math.ceil(q * total))
    i = int(np.searchsorted(np.cumsum(hist), rank))
    return MIN_S * GAMMA ** (i - 0.5) if i > 0 else MIN_S


class CountRing:
    """Per minute: requests in the hit ratio and hits, for ``minutes`` minutes back from the newest seen."""

    def __init__(self, minutes: int) -> None:
        self.n = minutes
        self.stamp = np.full(minutes, -1, dtype=np.int64)
        self.total = np.zeros(minutes, dtype=np.int64)
        self.hits = np.zeros(minutes, dtype=np.int64)
        self.newest = -1

    def add(self, minute: int, total: int, hits: int) -> bool:
        if minute <= self.newest - self.n:
            return False
        i = minute % self.n
        if self.stamp[i] != minute:
            self.stamp[i], self.total[i], self.hits[i] = minute, 0, 0
        self.total[i] += total
        self.hits[i] += hits
        self.newest = max(self.newest, minute)
        return True

    def window(self, start_minute: int, end_minute: int) -> tuple[int, int]:
        """(hits, total) over minutes start..end-1 (those still in the ring)."""
        mask = (self.stamp >= start_minute) & (self.stamp < end_minute)
        return int(self.hits[mask].sum()), int(self.total[mask].sum())


class LatencyRing:
    """Per minute: a sparse latency histogram (bucket -> count; a minute's requests fill a few hundred buckets
    at most), for ``minutes`` minutes."""

    def __init__(self, minutes: int) -> None:
        self.n = minutes
        self.stamp = [-1] * minutes
        self.hist: list[dict[int, int]] = [{} for _ in range(minutes)]
        self.newest = -1

    def add_counts(self, minute: int, counts: dict[int, int]) -> bool:
        if minute <= self.newest - self.n:
            return False
        i = minute % self.n
        h = self.hist[i]
        if self.stamp[i] != minute:
            h = self.hist[i] = {}
            self.stamp[i] = minute
        for k, c in counts.items():
            h[k] = h.get(k, 0) + c
        self.newest = max(self.newest, minute)
        return True

    def window(self, start_minute: int, end_minute: int) -> np.ndarray:
        out = np.zeros(NBINS, dtype=np.int64)
        for stamp, h in zip(self.stamp, self.hist, strict=True):
            if h and start_minute <= stamp < end_minute:
                np.add.at(out, np.fromiter(h.keys(), dtype=np.int64), np.fromiter(h.values(), dtype=np.int64))
        return out
