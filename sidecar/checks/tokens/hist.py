"""Token-length histograms: what the check reads, the reset-safe increase between two readings, binning of
per-request counts, and merging sparse buckets before a chi-square test.

A ``TokenHistogram`` is one cumulative reading of a server's per-request token histogram (the wiring turns the
server sources' snapshots into these, so this package never imports a source). ``Bins`` are per-bucket counts
over fixed upper ``edges`` plus one open bucket above the last.
"""

from __future__ import annotations

import bisect
import itertools
import math
from collections.abc import Sequence
from dataclasses import dataclass

__all__ = ["Bins", "TokenHistogram", "Tracker", "bin_of", "edges_text", "merge_for_test"]


@dataclass(frozen=True, slots=True)
class TokenHistogram:
    """One cumulative reading: ``buckets`` are (upper bound, cumulative count), ascending, the last ``inf``."""

    server: str
    model: str
    version: str
    tokens: str  # "input" | "output"
    buckets: tuple[tuple[float, float], ...]
    sum: float
    count: float


@dataclass
class Bins:
    """Per-bucket counts over ``edges`` (len(counts) == len(edges) + 1), the tokens' sum and the request count."""

    edges: tuple[float, ...]
    counts: list[float]
    sum: float = 0.0

    @classmethod
    def empty(cls, edges: tuple[float, ...]) -> Bins:
        return cls(edges, [0.0] * (len(edges) + 1))

    @property
    def n(self) -> float:
        return sum(self.counts)

    def add(self, other: Bins) -> None:
        self.counts = [a + b for a, b in zip(self.counts, other.counts, strict=True)]
        self.sum += other.sum


def bin_of(edges: Sequence[float], value: float) -> int:
    """The bucket of ``value``: the first edge at or above it (Prometheus' ``le``), else the open one."""
    return bisect.bisect_left(edges, value)


def edges_text(edges: Sequence[float]) -> str:
    """``1,2,5,10`` (bounded: at most 12 shown, then the count)."""
    shown = ",".join(f"{e:g}" for e in edges[:12])
    return shown if len(edges) <= 12 else f"{shown},... ({len(edges)} edges)"


def _per_bin(h: TokenHistogram) -> Bins | None:
    """Cumulative buckets to per-bucket counts; None when they are not a histogram (not ascending, no +Inf)."""
    if not h.buckets or not math.isinf(h.buckets[-1][0]):
        return None
    edges = tuple(le for le, _ in h.buckets[:-1])
    counts: list[float] = []
    below = 0.0
    for _le, cum in h.buckets:
        if cum < below or not math.isfinite(cum):
            return None
        counts.append(cum - below)
        below = cum
    if any(b <= a for a, b in itertools.pairwise(edges)):
        return None
    return Bins(edges, counts, h.sum if math.isfinite(h.sum) else 0.0)


class Tracker:
    """The last reading of each histogram and the increase since it, the way Prometheus' ``rate()`` does it:
    a bucket below its previous value is a reset (a server restart), and the increase is the new reading
    itself; a first reading counts from zero (its whole content is new); a reading with other edges than the
    previous one (a restart with another ``max_model_len`` or bucket option) also counts from zero, and says so."""

    def __init__(self, max_keys: int) -> None:
        self.max_keys = max_keys
        self._last: dict[tuple[str, str, str, str], Bins] = {}

    def increase(self, h: TokenHistogram) -> tuple[Bins | None, str]:
        """(the increase, "" | "reset" | "edges_changed" | "malformed" | "key_limit")."""
        cur = _per_bin(h)
        if cur is None:
            return None, "malformed"
        key = (h.server, h.model, h.version, h.tokens)
        prev = self._last.get(key)
        if prev is None and len(self._last) >= self.max_keys:
            return None, "key_limit"
        self._last[key] = cur
        if prev is None:
            return Bins(cur.edges, list(cur.counts), cur.sum), ""
        if prev.edges != cur.edges:
            return Bins(cur.edges, list(cur.counts), cur.sum), "edges_changed"
        delta = [c - p for c, p in zip(cur.counts, prev.counts, strict=True)]
        if any(d < 0 for d in delta) or cur.sum < prev.sum:
            return Bins(cur.edges, list(cur.counts), cur.sum), "reset"
        return Bins(cur.edges, delta, cur.sum - prev.sum), ""

    def forget(self, server: str, model: str, version: str) -> None:
        for k in [k for k in self._last if k[:3] == (server, model, version)]:
            del self._last[k]


def merge_for_test(
    ref: Sequence[float], cur: Sequence[float], edges: Sequence[float], min_expected: float
) -> tuple[dict[str, int], dict[str, int]]:
    """Adjacent buckets merged left to right until each expects ``min_expected`` counts in both rows of the
    2 x k table under homogeneity (expected = pooled count x the smaller row total / both totals: the
    contingency-table rule), a remainder joining the last group. Pooled, not reference-only: mass moving into
    buckets the reference left empty forms its own group instead of being merged away. Returns
    ({label: ref count}, {label: current count}) keyed by the merged buckets' ranges (``(20,50]``), as
    ``chi_square`` takes them."""
    n_ref, n_cur = sum(ref), sum(cur)
    scale = min(n_ref, n_cur) / (n_ref + n_cur) if n_ref + n_cur > 0 else 0.0
    groups: list[tuple[int, int]] = []  # (first bucket, last bucket), inclusive
    start, acc = 0, 0.0
    for i, (r, c) in enumerate(zip(ref, cur, strict=True)):
        acc += (r + c) * scale
        if acc >= min_expected:
            groups.append((start, i))
            start, acc = i + 1, 0.0
    if start < len(ref):
        if groups:
            groups[-1] = (groups[-1][0], len(ref) - 1)
        else:
            groups.append((0, len(ref) - 1))
    ref_out: dict[str, int] = {}
    cur_out: dict[str, int] = {}
    for a, b in groups:
        lo = "0" if a == 0 else f"{edges[a - 1]:g}"
        hi = "inf" if b >= len(edges) else f"{edges[b]:g}"
        label = f"({lo},{hi}]"
        ref_out[label] = round(sum(ref[a : b + 1]))
        cur_out[label] = round(sum(cur[a : b + 1]))
    return ref_out, cur_out
