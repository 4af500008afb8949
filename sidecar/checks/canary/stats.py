"""The statistics of the canary verdict: one test per aspect, each one-sided ("the candidate is worse").

- p50 and p99 latency: bootstrap test of the difference of the quantiles (candidate - baseline). The bootstrap
  distribution of a sample quantile is computed exactly rather than by resampling: the k-th order statistic
  of a resample is at most the j-th value when at least k of the n draws are, a Binomial(n, j/n) tail
  (Maritz and Jarrett 1978; Hutson and Ernst 2000). The p-value is the bootstrap probability that the
  candidate's quantile is not above the baseline's, from those two distributions: exact, deterministic (the
  same data always gives the same verdict), continuous (a resampling count would floor p at 1/resamples,
  which Benjamini-Hochberg over four aspects then inflates), and O(n) per quantile.
- error ratio: Fisher's exact test on the 2x2 table (errors, successes) x (candidate, baseline).
- scores: two-sample Kolmogorov-Smirnov (``sidecar.checks.stats.core.ks_2samp_fast``, the drift check's test);
  two-sided, since a score distribution that moved either way is a behaviour change.

Each aspect also has a floor on the size of the difference (config), so a large sample cannot call a 1%
latency difference "worse".
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np
import scipy.special as sps_special
import scipy.stats as sps

from sidecar.checks.stats.core import Ecdf, ks_2samp_fast

__all__ = ["ASPECTS", "AspectResult", "error_test", "quantile_tests", "score_test"]

ASPECTS = ("p50", "p99", "errors", "scores")
_QUANTILES = {"p50": 0.5, "p99": 0.99}


@dataclass
class AspectResult:
    aspect: str
    n_base: int
    n_cand: int
    base: float | None = None  # latency ms (p50, p99), error ratio (errors), mean score (scores)
    cand: float | None = None
    diff: float | None = None  # relative (latency), absolute points (errors), KS D (scores)
    p: float = math.nan  # NaN: not tested (too few values on a side)
    q: float = math.nan
    worse: bool = False
    detail: dict[str, float] = field(default_factory=dict)  # extra facts (intervals, queue/compute split)

    @property
    def tested(self) -> bool:
        return not math.isnan(self.p)


def _quantile_dist(sorted_x: np.ndarray, q: float) -> tuple[float, np.ndarray, np.ndarray]:
    """The sample q-quantile (the k-th order statistic, k = ceil(q n)) and its exact bootstrap distribution
    (values, weights): P(k-th order statistic of a resample <= x_(j)) = P(Binomial(n, j/n) >= k)."""
    n = sorted_x.size
    k = min(n, max(1, math.ceil(q * n)))
    # The weights vanish (below 1e-12) more than ~8 binomial standard deviations from k: only that band.
    half = int(8 * math.sqrt(n * q * (1 - q))) + 8
    lo, hi = max(0, k - 1 - half), min(n, k + half)
    w = np.diff(sps_special.bdtrc(k - 1, n, np.arange(lo, hi + 1) / n))
    return float(sorted_x[k - 1]), sorted_x[lo:hi], w / w.sum()


def _p_not_worse(xb: np.ndarray, wb: np.ndarray, xc: np.ndarray, wc: np.ndarray) -> float:
    """P*(candidate quantile <= baseline quantile), the two bootstrap distributions independent: the one-sided
    bootstrap p-value of "the candidate is slower", exact (no resampling floor, no normal approximation, which
    a single huge value in the tail would wreck)."""
    tail = np.concatenate((np.cumsum(wb[::-1])[::-1], [0.0]))  # tail[j] = P(Qb* >= xb[j])
    return float(np.clip(wc @ tail[np.searchsorted(xb, xc, side="left")], 0.0, 1.0))


def quantile_tests(base: np.ndarray, cand: np.ndarray, *, min_samples: int, min_tail: int = 5) -> list[AspectResult]:
    """p50 and p99 of the candidate against the baseline (values in ms). A quantile is decided only with
    ``min_tail`` values above it on each side (500 values for p99): below that it is the largest value or
    two, which no test can tell from a one-off stall."""
    out = [AspectResult(a, int(base.size), int(cand.size)) for a in _QUANTILES]
    sb, sc = np.sort(base), np.sort(cand)
    for r, q in zip(out, _QUANTILES.values(), strict=True):
        need = max(min_samples, math.ceil(min_tail / (1 - q) - 1e-9))
        if base.size < need or cand.size < need:
            continue
        b, xb, wb = _quantile_dist(sb, q)
        c, xc, wc = _quantile_dist(sc, q)
        r.base, r.cand = b, c
        r.diff = (c - b) / b if b > 0 else (math.inf if c > b else 0.0)
        r.p = _p_not_worse(xb, wb, xc, wc)
    return out


def error_test(base: np.ndarray, cand: np.ndarray, *, min_samples: int) -> AspectResult:
    """Error ratio (values 0 or 1) of the candidate against the baseline."""
    r = AspectResult("errors", int(base.size), int(cand.size))
    if base.size < min_samples or cand.size < min_samples:
        return r
    be, ce = int(np.count_nonzero(base)), int(np.count_nonzero(cand))
    r.base, r.cand = be / base.size, ce / cand.size
    r.diff = r.cand - r.base
    res = sps.fisher_exact([[ce, cand.size - ce], [be, base.size - be]], alternative="greater")
    r.p = float(res.pvalue)
    return r


def score_test(base: np.ndarray, cand: np.ndarray, *, min_samples: int) -> AspectResult:
    """Whether the candidate's scores are distributed differently from the baseline's."""
    r = AspectResult("scores", int(base.size), int(cand.size))
    if base.size < min_samples or cand.size < min_samples:
        return r
    ks = ks_2samp_fast(Ecdf.from_values(base), Ecdf.from_values(cand))
    r.base, r.cand = float(np.mean(base)), float(np.mean(cand))
    r.diff, r.p = ks.d, ks.p
    return r
