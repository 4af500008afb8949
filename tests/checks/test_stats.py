"""The statistics against scipy: D and p to 1e-9, sketch KS with real n's, BH, chi-square, PSI."""

from __future__ import annotations

import math

import numpy as np
import pytest
from datasketches import kll_doubles_sketch
from scipy import stats as sps

from sidecar.checks.stats.core import (
    Ecdf,
    benjamini_hochberg,
    chi_square,
    ks_2samp_fast,
    ks_many,
    kstwo_sf,
    psi_categorical,
    psi_numeric,
)
from sidecar.checks.stats.sketch import kll_to_ecdf


@pytest.mark.parametrize(
    ("n1", "n2", "decimals", "shift"),
    [
        (50_000, 20_000, None, 0.0),
        (100_000, 30_000, 1, 0.02),
        (400, 300, None, 0.3),
        (20_000, 7, None, 0.0),
        (5, 20_000, 0, 0.5),
        (12_000, 12_000, 2, 0.05),
        (3000, 9000, None, 0.1),
        (200_000, 60_000, None, 0.0),
        (200_000, 60_000, 2, 0.01),
        (60_000, 200_000, None, 0.03),
        (30_000, 50_000, 3, 0.0),
    ],
)
def test_ks_matches_scipy(n1: int, n2: int, decimals: int | None, shift: float) -> None:
    rng = np.random.default_rng(n1 + n2)
    ref, cur = rng.normal(size=n1), rng.normal(shift, 1.0, size=n2)
    if decimals is not None:  # ties on both sides
        ref, cur = np.round(ref, decimals), np.round(cur, decimals)
    ours = ks_2samp_fast(Ecdf.from_values(ref), Ecdf.from_values(cur))
    theirs = sps.ks_2samp(ref, cur)
    assert abs(ours.d - float(theirs.statistic)) <= 1e-9
    assert abs(ours.p - float(theirs.pvalue)) <= 1e-9


def test_ks_many_matches_single_calls() -> None:
    rng = np.random.default_rng(7)
    refs = [Ecdf.from_values(rng.normal(size=30_000)) for _ in range(4)]
    curs = [Ecdf.from_values(rng.normal(0.05 * i, 1.0, size=15_000)) for i in range(4)]
    many = ks_many(refs, curs)
    for r, c, m in zip(refs, curs, many, strict=True):
        single = sps.ks_2samp(r.values, c.values)
        assert abs(m.d - float(single.statistic)) <= 1e-9 and abs(m.p - float(single.pvalue)) <= 1e-9


def _sketch(values: np.ndarray, k: int = 200) -> Ecdf:
    s = kll_doubles_sketch(k)
    s.update(values)
    return kll_to_ecdf(s)


def test_sketch_ks_finds_small_shifts_that_datasketches_ks_test_misses() -> None:
    rng = np.random.default_rng(3)
    ref = rng.normal(size=1_000_000)
    ref_sk = _sketch(ref)
    found_exact, found_sketch, false_sketch = 0, 0, 0
    for i in range(6):
        shifted = i % 2 == 0
        cur = rng.normal(0.1 if shifted else 0.0, 1.0, size=100_000)
        exact = ks_2samp_fast(Ecdf.from_values(ref), Ecdf.from_values(cur))
        sk = ks_2samp_fast(ref_sk, _sketch(cur))
        assert sk.method == "sketch"
        assert abs(sk.d - exact.d) <= sk.d_error  # the stated error bound holds
        if shifted:
            found_exact += exact.p < 0.01
            found_sketch += sk.p < 0.01
        else:
            false_sketch += sk.p < 0.01
    assert found_exact == 3 and found_sketch == 3 and false_sketch == 0


def test_benjamini_hochberg_matches_the_textbook_and_skips_nan() -> None:
    p = [0.001, 0.008, 0.039, 0.041, 0.042, 0.06, 0.074, 0.205, math.nan]
    q = benjamini_hochberg(p)
    m = 8
    expected = [min(1.0, min(p[j] * m / (j + 1) for j in range(i, m))) for i in range(m)]
    assert np.allclose(q[:8], expected)
    assert math.isnan(q[8])


def test_chi_square_handles_unseen_categories_explicitly() -> None:
    ref = {"de": 500, "fr": 300, "it": 200}
    same = chi_square(ref, {"de": 250, "fr": 150, "it": 100})
    assert same.p > 0.9 and same.unseen_count == 0 and same.psi < 1e-9
    new = chi_square(ref, {"de": 230, "fr": 140, "it": 90, "es": 40})
    assert new.unseen_count == 40 and new.unseen_categories == ("es",)
    assert new.p < 1e-6 and new.psi > 0.1 and math.isclose(new.unseen_rate, 40 / 500)
    # The pooled column keeps the degrees of freedom at (known categories + 1 unseen) - 1.
    many_new = chi_square(ref, {"de": 250, **{f"x{i}": 1 for i in range(30)}})
    assert many_new.dof == 3


def test_psi_is_zero_on_identical_and_grows_with_shift() -> None:
    rng = np.random.default_rng(5)
    ref = Ecdf.from_values(rng.normal(size=50_000))
    assert psi_numeric(ref, ref) < 1e-12
    small = psi_numeric(ref, Ecdf.from_values(rng.normal(0.1, 1, size=50_000)))
    big = psi_numeric(ref, Ecdf.from_values(rng.normal(0.5, 1, size=50_000)))
    assert 0 < small < big
    assert psi_categorical({"a": 1, "b": 1}, {"a": 1, "b": 1}) == 0.0


@pytest.mark.parametrize("en", [141.0, 1000.0, 20_000.0, 90_909.0, 250_000.0, 2_000_000.0])
def test_vectorised_kstwo_sf_agrees_with_scipy_in_every_branch(en: float) -> None:
    # n*d^2 picks the branch: < 2.2 Pelz-Good, [2.2, 370) Smirnov's sum, >= 370 zero; plus the edges.
    nx2 = np.array([0.05, 0.3, 1.0, 2.19, 2.2, 2.5, 4.0, 9.0, 30.0, 369.0, 371.0])
    d = np.concatenate([np.sqrt(nx2 / en), [0.0, 0.55, 1.0, math.nan]])
    if en < 10_000:  # scipy's own Smirnov sum is cheap only at small n: test the whole grid there
        d = np.concatenate([d, np.linspace(0.001, 0.3, 30)])
    ours, theirs = kstwo_sf(d, en), sps.kstwo.sf(d, en)
    assert np.array_equal(np.isnan(ours), np.isnan(theirs))
    assert np.nanmax(np.abs(ours - theirs)) <= 1e-10
    tail = theirs > 1e-300  # and relative agreement where p is tiny but representable
    assert np.nanmax(np.abs(ours[tail] - theirs[tail]) / theirs[tail]) <= 2e-9


def test_ks_many_in_threads_on_unsorted_current_matches_scipy() -> None:
    rng = np.random.default_rng(11)
    raw_refs = [rng.normal(size=40_000) for _ in range(6)]
    raw_curs = [rng.normal(0.03 * i, 1.0, size=12_000 + 1000 * i) for i in range(6)]
    raw_refs[5], raw_curs[5] = raw_refs[5][:5000], raw_curs[5][:900]  # small: scipy's exact p-value path
    res = ks_many([Ecdf.from_values(r) for r in raw_refs], raw_curs, workers=3)
    assert [r.method for r in res] == ["asymp"] * 5 + ["exact"]
    for r, c, m in zip(raw_refs, raw_curs, res, strict=True):
        single = sps.ks_2samp(r, c)
        assert m.n_cur == len(c)
        assert abs(m.d - float(single.statistic)) <= 1e-9 and abs(m.p - float(single.pvalue)) <= 1e-9


def test_a_reference_handed_over_is_sorted_where_it_lies_and_otherwise_copied() -> None:
    data = np.random.default_rng(0).normal(size=(2, 1000))
    before = data[1].copy()
    taken = Ecdf.from_values(data[0], in_place=True)
    assert np.shares_memory(taken.values, data) and np.all(np.diff(data[0]) >= 0)  # no second copy held
    copied = Ecdf.from_values(data[1])
    assert not np.shares_memory(copied.values, data) and np.array_equal(data[1], before)
    assert np.array_equal(copied.values, np.sort(before))
