"""Power and false alarms of FleetFeatureDrifting over time, replayed through the generated rule's arithmetic,
and the per-sidecar drift check (the real ``DriftCheck``) on one sidecar's share of the same traffic.

    .venv/bin/python bench/bench_fleet_replay.py [--sidecars 50] [--rate 20] [--shift 0.1] [--days 10]
                                                 [--power-runs 10] [--sidecar-hours 2]

The fleet: every ``--interval`` (30 s) the sidecars together take ``sidecars x rate x interval`` events of a
normal feature (mean ``shift`` sd after the shift starts); their bin counts (20 bins at the reference's
quantiles) are a multinomial draw, the exact merge making the fleet's counts those of one sample. A sliding
window of W (30 min) of those counts gives the rule's binned D, its critical value c(a) sqrt((n + m)/(n m)) at
the default budget, and the condition D >= max(floor, critical) and n >= 200, held for ``for`` (5 min: every
evaluation over 5 minutes) before the alert fires, as Prometheus does. This is a Python replay of the rule
expressions, not Prometheus run for a day; tests/ops/test_fleet_rules.py and the live test hold the same
arithmetic equal to the engines' on real series.

Each replayed day or run draws its own reference sample of m values (the reference's own noise is in it).
Time to fire counts from the shift's start, with a full window of unshifted traffic before it.
The per-sidecar check: one sidecar's share (``rate`` events/s) through the drift check's default method
(multiscale: 60/300/1800-s blocks, BH, effect floor 0.05, 2 of 3 blocks) against the same kind of file
reference, evaluated every minute for ``--sidecar-hours`` after the shift: whether any finding turns active.
"""

from __future__ import annotations

import argparse
import math
import statistics
import tempfile
import time
from pathlib import Path

import numpy as np
from prometheus_client import CollectorRegistry
from scipy.stats import norm

from sidecar.checks.drift.references import Reference
from sidecar.checks.fleet.bins import binned_statistics, freeze
from sidecar.checks.stats.core import Ecdf
from sidecar.clock import FakeClock
from sidecar.config import parse_config
from sidecar.fleet_rules import FleetRulesOptions, critical_coefficient, per_look_level
from sidecar.service import Service

T0 = 1_700_000_000.0


def _bins(rng: np.random.Generator, m: int) -> tuple[tuple[float, ...], np.ndarray]:
    """A reference sample's frozen bins: its CDF at the edges and the edges themselves."""
    fb = freeze(Reference("numeric", m, 0, "bench", 0.0, Ecdf.from_values(rng.normal(size=m))), 20, 50)
    assert fb is not None
    return fb.ref_cdf, fb.edges


def _probs(edges: np.ndarray, shift: float) -> np.ndarray:
    """The population's mass per bin for a normal feature of mean ``shift``."""
    cdf = np.concatenate(([0.0], norm.cdf(edges - shift), [1.0]))
    return np.diff(cdf)


def replay(
    rng: np.random.Generator, a: argparse.Namespace, m: int, floor: float, secs: float, shift_at: float | None
) -> list[float]:
    """Times (s, from the start) at which the alert starts firing; the condition per 30-s evaluation."""
    o = FleetRulesOptions()
    c = critical_coefficient(per_look_level(o))
    ref_cdf, edges = _bins(rng, m)
    per_step = int(a.sidecars * a.rate * o.interval_secs)
    steps_w, hold = int(o.window_secs / o.interval_secs), int(o.for_secs / o.interval_secs)
    quiet, shifted = _probs(edges, 0.0), _probs(edges, a.shift)
    window: list[np.ndarray] = [rng.multinomial(per_step, quiet) for _ in range(steps_w)]  # a full window first
    total = np.sum(window, axis=0)
    fired, since, firing = [], None, False
    for k in range(int(secs / o.interval_secs)):
        t = k * o.interval_secs
        step = rng.multinomial(per_step, shifted if shift_at is not None and t >= shift_at else quiet)
        total += step - window.pop(0)
        window.append(step)
        n, d, _ = binned_statistics("numeric", ref_cdf, total)
        cond = n >= o.min_samples and d >= max(floor, c * math.sqrt((n + m) / (n * m)))
        since = (since if since is not None else k) if cond else None
        now_firing = since is not None and k - since >= hold
        if now_firing and not firing:
            fired.append(t)
        firing = now_firing
    return fired


def per_sidecar(seed: int, a: argparse.Namespace, m: int) -> tuple[float | None, int]:
    """One sidecar's share through the real drift check: (minutes from the shift to its first active finding,
    or None; evaluations run)."""
    rng = np.random.default_rng(seed)
    with tempfile.TemporaryDirectory() as d:
        ref = Path(d) / "ref.csv"
        ref.write_text("x\n" + "\n".join(repr(float(v)) for v in rng.normal(size=m)) + "\n")
        cfg = {
            "store": {"path": str(Path(d) / "s.sqlite")},
            "checks": {
                "drift": {
                    "enabled": True,
                    "eval_threads": 1,
                    "persist_interval_secs": 86400,
                    "reference": {"mode": "file", "path": str(ref)},
                    "models": {"m": {"features": {"x": "numeric"}}},
                }
            },
        }
        clock = FakeClock(T0)
        svc = Service(parse_config(cfg), registry=CollectorRegistry(), clock=clock)
        check = svc.component("drift")
        active: float | None = None
        evals = 0
        try:
            for k in range(int((1800 + a.sidecar_hours * 3600) / 10)):
                mean = a.shift if k * 10 >= 1800 else 0.0  # half an hour of quiet traffic, then the shift
                check.observe_columns("m", "1", clock.now(), {"x": rng.normal(mean, 1.0, size=int(a.rate * 10))})
                clock.advance(10)
                if k % 6 == 5:
                    evals += 1
                    if any(f.active for f in check.evaluate(clock.now())) and active is None:
                        active = (k + 1) * 10 / 60 - 30
        finally:
            svc.store.close()
    return active, evals


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--sidecars", type=int, default=50)
    ap.add_argument("--rate", type=float, default=20.0, help="events/s per sidecar")
    ap.add_argument("--shift", type=float, default=0.1, help="shift of the mean, in sd")
    ap.add_argument("--days", type=int, default=10, help="replayed quiet days per setting (false alarms)")
    ap.add_argument("--power-runs", type=int, default=10, help="replayed shifts per setting")
    ap.add_argument("--sidecar-runs", type=int, default=3)
    ap.add_argument("--sidecar-hours", type=float, default=2.0)
    ap.add_argument("--seed", type=int, default=28)
    a = ap.parse_args()
    rng = np.random.default_rng(a.seed)
    t0 = time.process_time()
    o = FleetRulesOptions()
    print(
        f"{a.sidecars} sidecars x {a.rate:g} events/s, shift {a.shift} sd; rule window {o.window_secs:.0f} s, "
        f"evaluated every {o.interval_secs:.0f} s, for {o.for_secs:.0f} s; c(a) = "
        f"{critical_coefficient(per_look_level(o)):.3f}; {a.days} quiet days and {a.power_runs} shifts per row"
    )
    print("m | floor | alerts over the quiet days | shifts fired within 2 h | time to fire: median, max (min)")
    for m in (5_000, 200_000):
        for floor in (0.05, 0.02):
            alarms = sum(len(replay(rng, a, m, floor, 86400, None)) for _ in range(a.days))
            times = []
            for _ in range(a.power_runs):
                got = replay(rng, a, m, floor, 7200, 0.0)
                times.append(got[0] / 60 if got else math.inf)
            hit = [t for t in times if math.isfinite(t)]
            when = f"{statistics.median(hit):.1f}, {max(hit):.1f}" if hit else "-"
            print(f"{m:>7} | {floor:>5} | {alarms:>26} | {len(hit):>15}/{a.power_runs} | {when}")
    for m in (5_000, 200_000):
        runs = [per_sidecar(a.seed + i, a, m) for i in range(a.sidecar_runs)]
        fired = [t for t, _ in runs if t is not None]
        print(
            f"per-sidecar drift check (multiscale, floor 0.05, {a.rate:g} events/s), m = {m}: active in {len(fired)} "
            f"of {len(runs)} sidecars within {a.sidecar_hours:g} h of the shift ({runs[0][1]} evaluations each)"
            + (f", first active after {', '.join(f'{t:.0f}' for t in fired)} min" if fired else "")
        )
    print(f"CPU {time.process_time() - t0:.1f} s")


if __name__ == "__main__":
    main()
