"""The two-sided one-sample Kolmogorov distribution's survival function, vectorised (``kstwo_sf``).

Split from ``stats.py``: this is the p-value half of the fast KS test, the one part that reimplements scipy
(``scipy.stats.kstwo.sf``) for speed, so its agreement tests (tests/checks/test_stats.py) pin it to scipy.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np
from scipy import special as sps_special
from scipy import stats as sps

__all__ = ["asymp_en", "kstwo_sf"]


_SQRT2PI = math.sqrt(2 * math.pi)
_PI2, _PI4, _PI6 = math.pi**2, math.pi**4, math.pi**6
_SQRT3 = math.sqrt(3.0)
_SMIRNOV_CHEAP_N = 2000  # below, scipy.special.smirnov is cheap (its sum has n terms)
_SMIRNOV_ASYMP_N = 1_000_000  # above, scipy.special.smirnov switches to a closed form (measured: 25 us)


def kstwo_sf(d: np.ndarray | Sequence[float], en: np.ndarray | Sequence[float] | float) -> np.ndarray:
    """``scipy.stats.kstwo.sf(d, en)`` for arrays, to 1e-11 absolute, without its per-element Python loop.

    scipy evaluates ``kstwo.sf`` one element at a time in Python (``_ksstats.kolmogn``), and for
    ``2.2 <= en*d**2 < 370`` with ``en <= 1e6`` it calls ``special.smirnov``, whose Birnbaum-Tingey sum has
    ``en`` terms in double-double arithmetic: ~80 ms at en = 90,909, so one feature with p below ~0.02
    costs more than the rest of an evaluation. Here the same branches are taken for all features at once:
    the Pelz-Good branch is scipy's own formula vectorised (same operations, agreement ~1e-16), the
    Smirnov branch is ``_smirnov_sf`` (agreement 1e-11 absolute, measured in the tests), and the rare
    remaining branches (tiny n, ``en*d <= 1``, ``d >= 0.5``, the DMTW corner) go to scipy itself.
    """
    x = np.atleast_1d(np.asarray(d, dtype=np.float64))
    n = np.broadcast_to(np.asarray(en, dtype=np.float64), x.shape).copy()
    out = np.full(x.shape, np.nan)
    ok = ~(np.isnan(x) | np.isnan(n))
    out[ok & (x >= 1.0)] = 0.0
    out[ok & (x <= 0.0)] = 1.0
    inner = ok & (x > 0.0) & (x < 1.0)
    t = n * x
    nx2 = t * x
    to_scipy = inner & (
        (t <= 1.0) | (t >= n - 1) | (x >= 0.5) | (n <= 140) | ((nx2 < 2.2) & (n <= 100_000) & (n * x**1.5 <= 1.4))
    )
    rest = inner & ~to_scipy
    out[rest & (nx2 >= 370.0)] = 0.0
    smir = rest & (nx2 >= 2.2) & (nx2 < 370.0)
    for i in np.flatnonzero(smir):
        ni = int(n[i])
        if ni <= _SMIRNOV_CHEAP_N or ni > _SMIRNOV_ASYMP_N:
            out[i] = 2.0 * float(sps_special.smirnov(ni, x[i]))
        else:
            out[i] = 2.0 * _smirnov_sf(ni, float(x[i]))
    pg = rest & (nx2 < 2.2)
    if pg.any():
        out[pg] = _pelz_good_sf(n[pg], x[pg])
    if to_scipy.any():
        out[to_scipy] = sps.kstwo.sf(x[to_scipy], n[to_scipy])
    return np.clip(out, 0.0, 1.0)


def _smirnov_sf(n: int, x: float) -> float:
    """``scipy.special.smirnov(n, x)`` (one-sided, P(D+ >= x)) for large n in well under a millisecond.

    The Birnbaum-Tingey sum ``x * sum_v C(n,v) (x+v/n)^(v-1) (1-x-v/n)^(n-v)`` is evaluated in logs. Its
    terms, as a function of a real v, are smooth and bell-shaped (their width in v is about
    ``n / sqrt(32 n x^2)`` or more) and negligible at both ends, so the trapezoid rule on every s-th term,
    times s, equals the full sum to far below double precision (the error of the trapezoid rule falls like
    ``exp(-2 pi^2 (width/s)^2)``; s is a quarter to an eighth of the width). What remains is the rounding of
    the logs, ~1e-9 relative at n = 1e6, i.e. 1e-11 absolute because this branch only runs for p < 0.03.
    """
    nn = math.floor(n * (1.0 - x))
    width = n / math.sqrt(32.0 * n * x * x)
    step = max(1, int(width / 8.0))
    v = np.arange(0, nn + 1, step, dtype=np.float64)
    b = x + v / n
    with np.errstate(under="ignore", divide="ignore"):
        logs = (
            -math.log(n + 1.0)
            - sps_special.betaln(n - v + 1.0, v + 1.0)
            + (v - 1.0) * np.log(b)
            + (n - v) * np.log1p(-b)
        )
        return float(x * step * np.sum(np.exp(logs)))


def _pelz_good_sf(n: np.ndarray, x: np.ndarray) -> np.ndarray:
    """``1 - scipy.stats._ksstats._kolmogn_PelzGood(n, x)``, vectorised: the same operations in the same order.

    Each element runs its own number of series terms (``ceil(16 z / pi)``, at most 8 in this branch), so a
    term is only added where it belongs to that element's series.
    """
    z = np.sqrt(n) * x
    zsq, z3, z4, z6 = z**2, z**3, z**4, z**6
    q = np.exp(-_PI2 / 8 / zsq)
    k1a, k1b = -zsq, _PI2 / 4
    k2a, k2b, k2c = 6 * z6 + 2 * z4, (2 * z4 - 5 * zsq) * _PI2 / 4, _PI4 * (1 - 2 * zsq) / 16
    k3d, k3c = _PI6 * (5 - 30 * zsq) / 64, _PI4 * (-60 * zsq + 212 * z4) / 16
    k3b, k3a = _PI2 * (135 * z4 - 96 * z6) / 4, -30 * z6 - 90 * z**8
    maxk = np.ceil(16 * z / np.pi).astype(np.int64)
    kk = np.zeros((4, *z.shape))
    top = int(maxk.max())
    for k in range(top, 0, -1):
        m = 2 * k - 1
        ms, m4, m6 = m**2, m**4, m**6
        on = maxk >= k
        qp = np.power(q, 8 * k)
        coeffs = (1.0, k1a + k1b * ms, k2a + k2b * ms + k2c * m4, k3a + k3b * ms + k3c * m4 + k3d * m6)
        for i in range(4):
            kk[i] = np.where(on, kk[i] * qp + coeffs[i], kk[i])
    kk *= q
    kk *= _SQRT2PI
    kk /= np.stack([z, 6 * z4, 72 * z**7, 6480 * z**10])
    q2 = np.exp(-_PI2 / 2 / zsq)
    s2 = np.zeros_like(z)
    s3 = np.zeros_like(z)
    sqrt3z = _SQRT3 * z
    for k in range(top, 0, -1):
        on = maxk >= k
        ksq = k**2
        qpw = q2**ksq
        kspi = math.pi * k
        s2 = np.where(on, s2 + ksq * qpw, s2)
        s3 = np.where(on, s3 + (sqrt3z + kspi) * (sqrt3z - kspi) * ksq * qpw, s3)
    kk[2] += s2 * (_PI2 * _SQRT2PI / (-36 * z3))
    kk[3] += s3 * (_PI2 * _SQRT2PI / (216 * z6))
    kk /= np.power(n, np.arange(4)[:, None] / 2.0)
    kk *= -1
    kk[0] += 1
    return ((kk[0] + kk[1]) + kk[2]) + kk[3]


def asymp_en(n1: int, n2: int) -> float:
    m, n = sorted([float(n1), float(n2)], reverse=True)
    return float(np.round(m * n / (m + n)))
