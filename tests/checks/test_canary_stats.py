"""The canary's quantile test: the exact bootstrap variance of a sample quantile agrees with resampling."""

from __future__ import annotations

import numpy as np
import pytest

from sidecar.checks.canary.stats import _quantile_dist, quantile_tests


@pytest.mark.parametrize(("n", "q"), [(200, 0.5), (200, 0.99), (2000, 0.5), (2000, 0.99)])
def test_exact_bootstrap_variance_matches_a_resampling_bootstrap(n: int, q: float) -> None:
    rng = np.random.default_rng(n)
    x = np.sort(rng.gamma(4, 10, n))
    point, values, weights = _quantile_dist(x, q)
    var = float(weights @ (values - weights @ values) ** 2)
    assert point == np.quantile(x, q, method="inverted_cdf")
    boot = np.quantile(x[rng.integers(0, n, (3000, n))], q, axis=1, method="inverted_cdf")
    assert var == pytest.approx(float(boot.var()), rel=0.12)


def test_the_quantile_test_is_one_sided_and_calibrated_under_no_difference() -> None:
    rng = np.random.default_rng(5)
    ps = np.array(
        [
            [r.p for r in quantile_tests(rng.gamma(4, 10, 500), rng.gamma(4, 10, 500), min_samples=200)]
            for _ in range(300)
        ]
    )
    # Same distribution: p is roughly uniform, so about 5% fall below 0.05 (not 30%, not 0%), p50 and p99.
    for col in (0, 1):
        assert 0.01 < np.mean(ps[:, col] < 0.05) < 0.10
    faster = quantile_tests(rng.gamma(4, 10, 500) * 1.5, rng.gamma(4, 10, 500), min_samples=200)
    assert faster[0].p > 0.5 and faster[1].p > 0.5  # a faster candidate is never "worse"


def test_one_huge_stall_of_the_baseline_does_not_hide_a_slower_candidate() -> None:
    rng = np.random.default_rng(9)
    base = np.concatenate((rng.gamma(4, 1, 499), [5000.0]))  # ~4 ms, one 5 s stall (a first call)
    cand = rng.gamma(4, 1, 500) + 60.0
    p50, p99 = quantile_tests(base, cand, min_samples=200)
    # The stall is the baseline's p99 in a resample only if it is drawn 6+ times: P(Poisson(1) >= 6) ~ 6e-4.
    assert p50.p < 1e-6 and p99.p < 1e-3


def test_p99_needs_enough_values_above_it() -> None:
    rng = np.random.default_rng(2)
    p50, p99 = quantile_tests(rng.gamma(4, 1, 499), rng.gamma(4, 1, 499) + 60, min_samples=200)
    assert p50.tested and not p99.tested  # 499 < 5 / (1 - 0.99)
    assert quantile_tests(rng.gamma(4, 1, 499), rng.gamma(4, 1, 499) + 60, min_samples=200, min_tail=4)[1].tested
