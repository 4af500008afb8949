"""The canary's quantile test: the exact bootstrap variance of a sample quantile agrees with resampling."""

from __future__ import annotations

import numpy as np
import pytest

from sidecar.checks.canary_stats import _order_stat, quantile_tests


@pytest.mark.parametrize(("n", "q"), [(200, 0.5), (200, 0.99), (2000, 0.5), (2000, 0.99)])
def test_exact_bootstrap_variance_matches_a_resampling_bootstrap(n: int, q: float) -> None:
    rng = np.random.default_rng(n)
    x = np.sort(rng.gamma(4, 10, n))
    point, var = _order_stat(x, q)
    assert point == np.quantile(x, q, method="inverted_cdf")
    boot = np.quantile(x[rng.integers(0, n, (3000, n))], q, axis=1, method="inverted_cdf")
    assert var == pytest.approx(float(boot.var()), rel=0.12)


def test_the_quantile_test_is_one_sided_and_calibrated_under_no_difference() -> None:
    rng = np.random.default_rng(5)
    ps = []
    for _ in range(200):
        a, b = rng.gamma(4, 10, 400), rng.gamma(4, 10, 400)
        ps.append(quantile_tests(a, b, min_samples=200)[0].p)
    # Same distribution: p is roughly uniform, so about 5% fall below 0.05 (not 30%, not 0%).
    assert 0.01 < np.mean(np.array(ps) < 0.05) < 0.10
    faster = quantile_tests(rng.gamma(4, 10, 400) + 5, rng.gamma(4, 10, 400), min_samples=200)
    assert faster[0].p > 0.5 and faster[1].p > 0.5  # a faster candidate is never "worse"
