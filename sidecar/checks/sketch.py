"""KLL quantile sketches as bounded-memory distributions for the drift tests.

We use the sketch only as a CDF: ``kll_to_ecdf`` turns its retained items and weights into a weighted step
CDF that ``stats.ks_2samp_fast`` tests with the *real* n's. datasketches' own ``ks_test`` is not used: its
threshold counts retained items (~600), not rows, so at 1M rows it missed every 0.1-sd shift
(docs/measured-facts.md).

Error: the KLL normalized rank error (single-sided) is ``eps(k)`` (about 1.33% at k=200, 0.67% at k=400) with
~99% confidence, so a sketch-based D is off by at most ``eps_ref + eps_cur``; the p-value is computed from
``max(0, D - that bound)`` so sketch error alone never raises a finding.
"""

from __future__ import annotations

import numpy as np
from datasketches import kll_doubles_sketch

from sidecar.checks.stats import Ecdf

__all__ = ["kll_error", "kll_from_bytes", "kll_to_ecdf", "new_kll"]


def new_kll(k: int) -> kll_doubles_sketch:
    return kll_doubles_sketch(k)


def kll_error(k: int) -> float:
    return float(kll_doubles_sketch.get_normalized_rank_error(k, False))


def kll_from_bytes(blob: bytes) -> kll_doubles_sketch:
    return kll_doubles_sketch.deserialize(blob)


def kll_to_ecdf(sketch: kll_doubles_sketch) -> Ecdf:
    """The sketch's step CDF; exact (error 0) while the sketch has not started compacting."""
    pairs = list(sketch)
    items = np.fromiter((p[0] for p in pairs), dtype=np.float64, count=len(pairs))
    weights = np.fromiter((p[1] for p in pairs), dtype=np.float64, count=len(pairs))
    if not sketch.is_estimation_mode():
        return Ecdf.from_values(items)
    return Ecdf.from_weighted(items, weights, int(sketch.n), kll_error(int(sketch.k)))
