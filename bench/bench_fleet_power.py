"""Power of the fleet alert: how often FleetFeatureDrifting's condition holds for a shift of the mean, when a
fleet of sidecars merges its bins (the merge is exact, so the fleet's counts are those of one sample of the
union). Seeded; prints one row per setting.

    .venv/bin/python bench/bench_fleet_power.py [--reps 200] [--shift 0.1] [--sidecars 50]

The condition is the generated rule's: binned D >= max(floor, c(a) * sqrt((n + m) / (n m))) and n >= 200,
with a from the default budget (1/30 a day per model/version, 20 features, 30-minute windows).
"""

from __future__ import annotations

import argparse
import math

import numpy as np

from sidecar.checks.drift.references import Reference
from sidecar.checks.fleet.bins import binned_statistics, freeze
from sidecar.checks.stats.core import Ecdf
from sidecar.fleet_rules import FleetRulesOptions, critical_coefficient, per_look_level


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--reps", type=int, default=200)
    ap.add_argument("--shift", type=float, default=0.1)
    ap.add_argument("--sidecars", type=int, default=50)
    a = ap.parse_args()
    c = critical_coefficient(per_look_level(FleetRulesOptions()))
    rng = np.random.default_rng(28)
    print(f"shift {a.shift} sd, {a.sidecars} sidecars, {a.reps} windows per row, c(a) = {c:.3f}")
    print("reference m | events per sidecar per window | fleet n | floor | critical | mean binned D | P(alert)")
    for m in (5_000, 200_000):
        ref_vals = rng.normal(size=m)
        fb = freeze(Reference("numeric", m, 0, "bench", 0.0, Ecdf.from_values(ref_vals)), 20, 50)
        assert fb is not None
        for per in (20, 200, 2_000):
            n = per * a.sidecars
            crit = c * math.sqrt((n + m) / (n * m))
            ds = []
            for _ in range(a.reps):
                cur = rng.normal(a.shift, 1.0, size=n)
                counts, _ = fb.count_numbers(cur)
                ds.append(binned_statistics("numeric", fb.ref_cdf, counts)[1])
            d = np.array(ds)
            for floor in (0.05, 0.02):
                p = float(np.mean(d >= max(floor, crit))) if n >= 200 else 0.0
                print(f"{m:>11} | {per:>29} | {n:>7} | {floor:>5} | {crit:8.4f} | {d.mean():13.4f} | {p:.2f}")


if __name__ == "__main__":
    main()
