"""The statistics of the canary verdict: one test per aspect, each one-sided ("the candidate is worse").

- p50 and p99 latency: bootstrap test of the difference of the quantiles (candidate - baseline). The bootstrap
  distribution of a sample quantile is computed exactly rather than by resampling: the k-th order statistic
  of a resample is at most the j-th value when at least k of the n draws are, a Binomial(n, j/n) tail
  (Maritz and Jarrett 1978; Hutson and Ernst 2000). That gives the bootstrap standard error in O(n) with no
  random numbers (the same data always gives the same verdict, and 50 pairs cost milliseconds, not seconds).
  The p-value is the normal tail of the observed difference over that standard error, so it is continuous (a
  resampling count would floor p at 1/resamples, which Benjamini-Hochberg over four aspects then inflates).
- error ratio: Fisher's exact test on the 2x2 table (errors, successes) x (candidate, baseline).
- scores: two-sample Kolmogorov-Smirnov (``sidecar.checks.stats.ks_2samp_fast``, the drift check's test);
  two-sided, since a score distribution that moved either way is a behaviour change.

Each aspect also has a floor on the size of the difference (config), so a large sample cannot call a 1%
latency difference "worse".
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import scipy.special as sps_special
import scipy.stats as sps

from sidecar.checks.stats import Ecdf, ks_2samp_fast

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

    @property
    def tested(self) -> bool:
        return not math.isnan(self.p)


def _order_stat(sorted_x: np.ndarray, q: float) -> tuple[float, float]:
    """The sample q-quantile (the k-th order statistic, k = ceil(q n)) and its exact bootstrap variance."""
    n = sorted_x.size
    k = min(n, max(1, math.ceil(q * n)))
    # P(k-th order statistic of a resample <= x_(j)) = P(Binomial(n, j/n) >= k). The weights vanish (below
    # 1e-12) more than ~8 binomial standard deviations from k, so only that band is computed.
    half = int(8 * math.sqrt(n * q * (1 - q))) + 8
    lo, hi = max(0, k - 1 - half), min(n, k + half)
    cdf = sps_special.bdtrc(k - 1, n, np.arange(lo, hi + 1) / n)
    w = np.diff(cdf)
    x = sorted_x[lo:hi]
    w /= w.sum()
    mean = float(w @ x)
    var = max(0.0, float(w @ (x - mean) ** 2))
    return float(sorted_x[k - 1]), var


def quantile_tests(base: np.ndarray, cand: np.ndarray, *, min_samples: int) -> list[AspectResult]:
    """p50 and p99 of the candidate against the baseline (values in ms)."""
    out = [AspectResult(a, int(base.size), int(cand.size)) for a in _QUANTILES]
    if base.size < min_samples or cand.size < min_samples:
        return out
    sb, sc = np.sort(base), np.sort(cand)
    for r, q in zip(out, _QUANTILES.values(), strict=True):
        b, var_b = _order_stat(sb, q)
        c, var_c = _order_stat(sc, q)
        r.base, r.cand = b, c
        r.diff = (c - b) / b if b > 0 else (math.inf if c > b else 0.0)
        se = math.sqrt(var_b + var_c)
        if se > 0:
            r.p = float(sps.norm.sf((c - b) / se))
        else:  # both samples constant around their quantile: the difference is what it is
            r.p = 0.0 if c > b else 1.0
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
