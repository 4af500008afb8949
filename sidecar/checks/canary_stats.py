"""The statistics of the canary verdict: one test per aspect, each one-sided ("the candidate is worse").

- p50 and p99 latency: bootstrap of the difference of the quantiles (candidate - baseline), both resampled
  with replacement; the p-value is the normal tail of the observed difference over the bootstrap standard
  error, so it is continuous (a plain bootstrap count would floor p at 1/resamples, which Benjamini-Hochberg
  over four aspects then inflates past any useful alpha).
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


def quantile_tests(base: np.ndarray, cand: np.ndarray, *, resamples: int, min_samples: int,
                   rng: np.random.Generator) -> list[AspectResult]:
    """p50 and p99 of the candidate against the baseline (values in ms)."""
    out = [AspectResult(a, int(base.size), int(cand.size)) for a in _QUANTILES]
    if base.size < min_samples or cand.size < min_samples:
        return out
    qs = list(_QUANTILES.values())
    bq = np.quantile(base, qs)
    cq = np.quantile(cand, qs)
    boot_b = np.quantile(base[rng.integers(0, base.size, (resamples, base.size))], qs, axis=1)
    boot_c = np.quantile(cand[rng.integers(0, cand.size, (resamples, cand.size))], qs, axis=1)
    se = np.std(boot_c - boot_b, axis=1, ddof=1)
    for i, r in enumerate(out):
        b, c = float(bq[i]), float(cq[i])
        r.base, r.cand = b, c
        r.diff = (c - b) / b if b > 0 else (math.inf if c > b else 0.0)
        point = c - b
        if se[i] > 0:
            r.p = float(sps.norm.sf(point / se[i]))
        else:  # every resample gave the same difference: it is the difference
            r.p = 0.0 if point > 0 else 1.0
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
