"""KLL quantile sketches as bounded-memory distributions for the drift tests.

We use the sketch only as a CDF: ``kll_to_ecdf`` turns its retained items and weights into a weighted step
CDF that ``stats.ks_2samp_fast`` tests with the *real* n's. datasketches' own ``ks_test`` is not used: its
threshold counts retained items (~600), not rows, so at 1M rows it missed every 0.1-sd shift
(docs/measured-facts.md).

Items are float32 (``kll_floats_sketch``): at the same bytes a float sketch holds twice the items of a double
one, so k=400 costs what k=200 did with doubles (~4.8 KB serialized at 1M values) and halves the rank error.
A CDF needs no more than float32's 7 digits; values beyond +-3.4e38 would become infinite (the windows treat
non-finite values as missing before they reach a sketch).

Error: the KLL normalized rank error (single-sided) is ``eps(k)`` (about 0.68% at k=400) with ~99%
confidence, so a sketch-based D is off by at most ``eps_ref + eps_cur``; the p-value is computed from
``max(0, D - that bound)`` so sketch error alone never raises a finding.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from datasketches import kll_doubles_sketch, kll_floats_sketch

from sidecar.checks.stats.core import Ecdf

__all__ = ["kll_error", "kll_from_bytes", "kll_to_ecdf", "kll_update", "new_kll"]

ITEMS = "f32"  # the item type of the sketches this module makes (stored with every window)


def new_kll(k: int) -> kll_floats_sketch:
    return kll_floats_sketch(k)


def kll_update(sketch: Any, values: np.ndarray) -> None:
    """Folds ``values`` into the sketch, sorted first: its compactions sort each level they halve, and on sorted
    runs they cost about two thirds (runs of 625 normal values at k=400: 37 -> 24 ns a value with the sort,
    ``docs/events.md`` "Speed"). The KLL error bound holds for any order of the input, so it holds for this one."""
    sketch.update(np.sort(np.asarray(values, dtype=np.float32)))


def kll_error(k: int) -> float:
    return float(kll_floats_sketch.get_normalized_rank_error(k, False))


def kll_from_bytes(blob: bytes, items: str = ITEMS) -> kll_floats_sketch:
    """A stored sketch; one of float64 items (stored before the float32 change) is rebuilt as float32 from
    its items and weights, so it merges with the new ones (the same distribution, within its own error)."""
    if items == ITEMS:
        return kll_floats_sketch.deserialize(blob)
    old = kll_doubles_sketch.deserialize(blob)
    new = kll_floats_sketch(int(old.k))
    pairs = list(old)
    if pairs:
        vals = np.fromiter((p[0] for p in pairs), dtype=np.float64, count=len(pairs))
        weights = np.fromiter((p[1] for p in pairs), dtype=np.int64, count=len(pairs))
        kll_update(new, np.repeat(vals, weights))
    return new


def kll_to_ecdf(sketch: Any) -> Ecdf:
    """The sketch's step CDF; exact (error 0) while the sketch has not started compacting."""
    pairs = list(sketch)
    items = np.fromiter((p[0] for p in pairs), dtype=np.float64, count=len(pairs))
    weights = np.fromiter((p[1] for p in pairs), dtype=np.float64, count=len(pairs))
    if not sketch.is_estimation_mode():
        return Ecdf.from_values(items)
    return Ecdf.from_weighted(items, weights, int(sketch.n), kll_error(int(sketch.k)))
