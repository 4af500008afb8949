"""A window fed arrays (``add_numbers``) holds what it holds fed the same values one at a time: the same totals,
missing counts and raw values, folded into the sketch at the same points (each time ``exact_cap`` are held)."""

from __future__ import annotations

import math

import numpy as np
import pytest

from sidecar.checks.stats.windows import FeatureWindow


def _window() -> FeatureWindow:
    return FeatureWindow("numeric", bucket_secs=60.0, n_buckets=5, exact_cap=7, kll_k=50)


def _state(w: FeatureWindow) -> list[tuple[int, int, int, list[float], int | None]]:
    return [
        (i, b.total, b.missing, list(b.values), None if b.sketch is None else int(b.sketch.n))  # type: ignore[attr-defined]
        for i, b in sorted(w._buckets.items())
    ]


@pytest.mark.parametrize("chunks", [[3, 4, 1, 9, 2, 20], [7, 7, 7], [1] * 15, [30], [6, 2, 13]])
def test_arrays_fold_where_single_values_fold(chunks: list[int]) -> None:
    rng = np.random.default_rng(5)
    values = rng.normal(size=sum(chunks))
    values[[2, 11]] = math.nan
    values[5] = math.inf
    one, bulk = _window(), _window()
    for v in values:
        one.add_number(1_000.0, float(v))
    start = 0
    for n in chunks:
        bulk.add_numbers(1_000.0, values[start : start + n])
        start += n
    assert _state(bulk) == _state(one)
    assert _state(one)[0][4] is not None, "the values must have reached the sketch"


@pytest.mark.parametrize("chunks", [[3, 4, 1, 9, 2, 20], [6, 2, 13], [5, 1, 1]])
def test_finite_arrays_fold_where_single_values_fold(chunks: list[int]) -> None:
    """``finite=True`` (an ``EventColumns`` column, finite at the door) skips the finiteness test, nothing else:
    runs that stay under ``exact_cap`` are copied in at once, the others fold at the same points."""
    values = np.random.default_rng(6).normal(size=sum(chunks))
    one, bulk = _window(), _window()
    for v in values:
        one.add_number(1_000.0, float(v))
    start = 0
    for n in chunks:
        bulk.add_numbers(1_000.0, values[start : start + n], finite=True)
        start += n
    assert _state(bulk) == _state(one)
    assert _state(one)[0][4] is not None or sum(chunks) < 7
