"""Bins frozen at a reference: edges, the reference's CDF (or shares) at them, and the reference id.

A numeric reference of n values (or a KLL sketch's weighted CDF) gets edges at its i/bins quantiles (the
inverted-CDF quantile, so an edge is a reference value and the reference CDF there is exact); tied quantiles
merge. Bin j holds the values in (edge[j-1], edge[j]] (Prometheus' ``le``); the last bin is (edge[-1], +Inf].
A categorical reference gets one bin per category (the ``max_categories`` most frequent) plus ``__other__``.

The reference id is a content hash of the reference and of the binning parameters: sidecars loading the same
reference file with the same settings get the same id and the same edges, so their counters add exactly.
``binned_statistics`` is the Python computation of what the generated rules compute (tests compare the two).
"""

from __future__ import annotations

import hashlib
import math
from dataclasses import dataclass, field

import numpy as np
from prometheus_client.utils import floatToGoString

from sidecar.checks.drift.references import Reference
from sidecar.checks.stats.windows import FeatureKind

__all__ = ["OTHER", "PSI_EPS", "FrozenBins", "binned_statistics", "freeze", "histogram_quantile", "reference_id"]

OTHER = "__other__"
PSI_EPS = 1e-4  # the drift check's floor for an empty bin's share (sidecar/checks/stats/core.py)


@dataclass(frozen=True)
class FrozenBins:
    kind: FeatureKind
    ref_id: str
    ref_size: int  # the reference's non-missing values (the m of the KS critical value)
    edges: np.ndarray  # numeric: the finite upper edges, ascending (the +Inf bin comes after them)
    labels: tuple[str, ...]  # numeric: each bin's ``le`` ("+Inf" last); categorical: category names, OTHER last
    lows: tuple[str, ...]  # numeric: each bin's lower edge ("-Inf" first); categorical: empty
    ref_cdf: tuple[float, ...]  # numeric: reference CDF at each ``le``; categorical: reference share per bin
    index: dict[str, int] = field(default_factory=dict)  # categorical: category -> bin

    @property
    def n_bins(self) -> int:
        return len(self.labels)

    def count_numbers(self, values: np.ndarray) -> tuple[np.ndarray, int]:
        """Per-bin counts of ``values`` (float64; NaN is missing) and how many were missing."""
        finite = values[~np.isnan(values)]
        idx = np.searchsorted(self.edges, finite, side="left")
        return np.bincount(idx, minlength=self.n_bins), int(values.shape[0] - finite.shape[0])

    def count_categories(self, keys: list[str]) -> np.ndarray:
        other = self.n_bins - 1
        get = self.index.get
        return np.bincount(
            np.fromiter((get(k, other) for k in keys), dtype=np.intp, count=len(keys)), minlength=self.n_bins
        )


def reference_id(ref: Reference, bins: int, max_categories: int) -> str:
    """A content hash of the reference (its values or counts, not where or when it was made) and the binning."""
    h = hashlib.sha256(f"{ref.kind}|{bins}|{max_categories}|{ref.total}|{ref.missing}|".encode())
    if ref.ecdf is not None:
        h.update(np.ascontiguousarray(ref.ecdf.values, dtype=np.float64).tobytes())
        if ref.ecdf.cum is not None:
            h.update(b"|cum|" + np.ascontiguousarray(ref.ecdf.cum, dtype=np.float64).tobytes())
    for k, v in sorted((ref.counts or {}).items()):
        h.update(f"{k}\x00{v}\x00".encode())
    return h.hexdigest()[:16]


def freeze(ref: Reference, bins: int, max_categories: int) -> FrozenBins | None:
    """The bins of ``ref``; None when it holds no value."""
    rid = reference_id(ref, bins, max_categories)
    if ref.kind == "numeric":
        e = ref.ecdf
        if e is None or e.values.shape[0] == 0:
            return None
        total = float(e.n) if e.cum is None else float(e.cum[-1])
        targets = np.arange(1, bins) * (total / bins)
        if e.cum is None:
            idx = np.clip(np.ceil(targets - 1e-9).astype(np.int64) - 1, 0, e.values.shape[0] - 1)
        else:
            idx = np.clip(np.searchsorted(e.cum, targets - 1e-9, side="left"), 0, e.values.shape[0] - 1)
        edges = np.unique(e.values[idx])
        edges = edges[np.isfinite(edges)]
        cdf = np.asarray(e.count_le(edges), dtype=np.float64) / total
        les = (*(floatToGoString(float(x)) for x in edges), "+Inf")
        return FrozenBins(
            kind="numeric",
            ref_id=rid,
            ref_size=int(e.n),
            edges=edges,
            labels=les,
            lows=("-Inf", *les[:-1]),
            ref_cdf=(*(float(c) for c in cdf), 1.0),
        )
    counts = {k: v for k, v in (ref.counts or {}).items() if v > 0}
    size = sum(counts.values())
    if size == 0:
        return None
    top = sorted(k for k, _ in sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))[:max_categories] if k != OTHER)
    rest = size - sum(counts[k] for k in top)
    return FrozenBins(
        kind="categorical",
        ref_id=rid,
        ref_size=size,
        edges=np.empty(0),
        labels=(*top, OTHER),
        lows=(),
        ref_cdf=(*(counts[k] / size for k in top), rest / size),
        index={k: i for i, k in enumerate(top)},
    )


def binned_statistics(kind: FeatureKind, ref: tuple[float, ...], counts: np.ndarray) -> tuple[int, float, float]:
    """(n, D, PSI) of merged per-bin ``counts`` against the reference's CDF at the same edges (numeric) or its
    shares (categorical, D is NaN): what the generated recording rules compute. D is the largest gap between
    the two CDFs at the edges, a lower bound of the exact KS D, below it by at most one bin's mass."""
    counts = np.asarray(counts, dtype=np.float64)
    n = int(counts.sum())
    if n == 0:
        return 0, math.nan, math.nan
    if kind == "numeric":
        cur_cdf = np.cumsum(counts) / n
        ref_cdf = np.asarray(ref, dtype=np.float64)
        d = float(np.max(np.abs(cur_cdf - ref_cdf)))
        p = np.diff(np.concatenate(([0.0], cur_cdf)))
        q = np.diff(np.concatenate(([0.0], ref_cdf)))
    else:
        d = math.nan
        p, q = counts / n, np.asarray(ref, dtype=np.float64)
    a, b = np.clip(q, PSI_EPS, None), np.clip(p, PSI_EPS, None)
    return n, d, float(np.sum((b - a) * np.log(b / a)))


def histogram_quantile(q: float, uppers: list[float], cumulative: list[float]) -> float:
    """Prometheus' ``histogram_quantile`` (promql/quantile.go, bucketQuantile) of cumulative bucket counts at
    ascending upper edges (the last +Inf): linear inside the bucket that holds rank q * n; the +Inf bucket
    answers the last finite edge; the first bucket starts at 0 (or is its edge when that is <= 0)."""
    n = cumulative[-1] if cumulative else 0.0
    if len(uppers) < 2 or not math.isinf(uppers[-1]) or n == 0 or math.isnan(q):
        return math.nan
    rank = q * n
    b = next((i for i, c in enumerate(cumulative[:-1]) if c >= rank), len(cumulative) - 1)
    if b == len(cumulative) - 1:
        return uppers[-2]
    if b == 0 and uppers[0] <= 0:
        return uppers[0]
    start, end, count = 0.0, uppers[b], cumulative[b]
    if b > 0:
        start, count, rank = uppers[b - 1], count - cumulative[b - 1], rank - cumulative[b - 1]
    return start + (end - start) * (rank / count)
