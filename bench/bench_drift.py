"""Drift benchmark: ours against a plain scipy loop (and alibi-detect / Evidently when installed), in one run.

    .venv/bin/python bench/bench_drift.py            # 50 features, 1,000,000 reference rows, 100,000 current
    .venv/bin/python bench/bench_drift.py --quick    # 50 features, 200,000 / 20,000 (a smoke run)
    .venv/bin/python bench/bench_drift.py --section quality --hours 24 --seeds 9   # ~3 minutes

Sections: ``speed`` (per-evaluation time, agreement of D and p to 1e-9, bounded-memory sketch mode against
exact mode and against datasketches' own ks_test) and ``quality`` (false alarms per day of replayed no-drift
traffic and the detection delay of a 0.2-sd shift at 100 events/s, through the real DriftCheck on a fake clock).
"""

from __future__ import annotations

import argparse
import os
import resource
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import cast

import numpy as np
from datasketches import kll_doubles_sketch, ks_test
from prometheus_client import CollectorRegistry
from scipy import stats as sps

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from sidecar.checks.sketch import kll_to_ecdf
from sidecar.checks.stats import Ecdf, KsResult, benjamini_hochberg, ks_many

SHIFTED = (3, 11, 19, 27, 35)  # features whose current mean moves by 0.1 sd


def _rss_mib() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0


def _median_time(fn: Callable[[], object], repeat: int) -> tuple[float, object]:
    times, out = [], None
    for _ in range(repeat):
        t0 = time.perf_counter()
        out = fn()
        times.append(time.perf_counter() - t0)
    return float(np.median(times)), out


def speed(n_features: int, n_ref: int, n_cur: int, seed: int, repeat: int) -> None:
    rng = np.random.default_rng(seed)
    ref = rng.normal(size=(n_features, n_ref))
    cur = rng.normal(size=(n_features, n_cur))
    for j in SHIFTED:
        if j < n_features:
            cur[j] += 0.1
    print(f"== speed: {n_features} numeric features, reference {n_ref:,} rows, current {n_cur:,} rows; "
          f"{os.cpu_count()} CPUs; ours: median of {repeat} ==")

    t0 = time.perf_counter()
    scipy_res = [sps.ks_2samp(ref[j], cur[j]) for j in range(n_features)]
    t_scipy = time.perf_counter() - t0

    t0 = time.perf_counter()
    refs = [Ecdf.from_values(ref[j]) for j in range(n_features)]
    t_sort = time.perf_counter() - t0
    # "ours" starts from the unsorted current rows, as the live check does: sorting them is part of the work.
    curs = [cur[j] for j in range(n_features)]
    t_one, ours_one = _median_time(lambda: ks_many(refs, curs, workers=1), repeat)
    t_two, ours_two = _median_time(lambda: ks_many(refs, curs, workers=2), repeat)

    print(f"{'method':62s} {'per evaluation':>15s}")
    print(f"{'scipy.stats.ks_2samp loop (baseline)':62s} {t_scipy:14.3f}s")
    for label, t in (("ours, 1 thread (sorted reference, sort+search current, vector p)", t_one),
                     ("ours, 2 threads (the same, features spread over a pool)", t_two)):
        print(f"{label:62s} {t:14.3f}s   ratio {t_scipy / t:5.1f}x faster")
    print(f"{'  (one-off reference sort, at reference load)':62s} {t_sort:14.3f}s")
    for label, ours in (("1 thread", ours_one), ("2 threads", ours_two)):
        res = cast(list[KsResult], ours)
        dd = max(abs(o.d - float(s.statistic)) for o, s in zip(res, scipy_res, strict=True))
        dp = max(abs(o.p - float(s.pvalue)) for o, s in zip(res, scipy_res, strict=True))
        print(f"agreement with scipy ({label}): max |dD| = {dd:.3g}, max |dp| = {dp:.3g} "
              f"({'OK' if dd <= 1e-9 and dp <= 1e-9 else 'MISMATCH'} at 1e-9)")
    ours = cast(list[KsResult], ours_one)

    for name in ("alibi_detect", "evidently"):
        try:
            __import__(name)
            print(f"{name}: installed, but not wired in this bench run (see docs/drift.md)")
        except ImportError:
            print(f"{name}: not installed, skipped")
    print("  reference only, from docs/measured-facts.md (NOT measured in this run): scipy loop 10.4 s, "
          "alibi-detect KSDrift 10.9 s, Evidently DataDriftPreset(ks) 94.4 s / 2.3 GiB")

    # Bounded-memory mode: KLL sketches of both sides, tested with the real n's.
    k = 200
    t0 = time.perf_counter()
    ref_sk, cur_sk = [], []
    for j in range(n_features):
        a, b = kll_doubles_sketch(k), kll_doubles_sketch(k)
        a.update(ref[j])
        b.update(cur[j])
        ref_sk.append(a)
        cur_sk.append(b)
    t_build = time.perf_counter() - t0
    t0 = time.perf_counter()
    sk = ks_many([kll_to_ecdf(s) for s in ref_sk], [kll_to_ecdf(s) for s in cur_sk])
    t_sk = time.perf_counter() - t0
    q_exact = benjamini_hochberg([o.p for o in ours])
    q_sk = benjamini_hochberg([o.p for o in sk])
    exact_found = {j for j in range(n_features) if q_exact[j] < 0.01}
    sk_found = {j for j in range(n_features) if q_sk[j] < 0.01}
    ds_found = {j for j in range(n_features) if ks_test(ref_sk[j], cur_sk[j], 0.01)}
    derr = max(abs(s.d - o.d) for s, o in zip(sk, ours, strict=True))
    print(f"sketch mode (KLL k={k}): build {t_build:.3f}s (once per window), test {t_sk:.3f}s; "
          f"max |D_sketch - D_exact| = {derr:.4f} (bound {sk[0].d_error:.4f})")
    print(f"  shifted features (0.1 sd): {sorted(j for j in SHIFTED if j < n_features)}")
    print(f"  exact mode flags {sorted(exact_found)}; sketch mode flags {sorted(sk_found)}; "
          f"datasketches ks_test flags {sorted(ds_found)}")
    print(f"peak RSS so far: {_rss_mib():.0f} MiB")


def quality(hours: float, seed: int, seeds: int, window_secs: float, sustained_secs: float,
            eval_secs: float) -> None:
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests" / "drift"))
    from drift_testutil import make_ctx

    from sidecar.checks.drift import DriftCheck
    from sidecar.clock import FakeClock
    from sidecar.model import Batch, Event

    rate = 100
    feats = ("a", "b", "c")
    cfg = {"checks": {"drift": {"enabled": True, "window_secs": window_secs, "sustained_secs": sustained_secs,
                                "eval_threads": 1, "reference": {"mode": "pinned", "pinned_events": 5000}}}}

    def run(run_seed: int, sim_secs: float, shift_at: float | None,
            shift: float) -> tuple[int, int, int, float | None]:
        clock = FakeClock()
        with tempfile.TemporaryDirectory() as d:
            ctx = make_ctx(Path(d) / "s.sqlite", clock, cfg, registry=CollectorRegistry())
            check = DriftCheck(ctx, ctx.config.checks.drift)
            rng = np.random.default_rng(run_seed)
            start = clock.now()
            rounds = alarms = significant = 0
            first: float | None = None
            next_eval = start + eval_secs
            while clock.now() - start < sim_secs:
                t = clock.now() - start
                vals = rng.normal(size=(rate, len(feats)))
                if shift_at is not None and t >= shift_at:
                    vals[:, 0] += shift
                check.observe(Batch("events", "bench", tuple(
                    Event("m", "1", clock.now(), dict(zip(feats, map(float, row), strict=True)))
                    for row in vals)))
                clock.advance(1.0)
                if clock.now() >= next_eval:
                    next_eval += eval_secs
                    rounds += 1
                    fs = [f for f in check.evaluate(clock.now()) if f.labels["test"] != "missing"]
                    significant += any(f.p_value is not None and f.p_value < 0.01 for f in fs)
                    active = [f for f in fs if f.active]
                    alarms += bool(active)
                    if active and first is None and shift_at is not None:
                        first = clock.now() - start - shift_at
                        break  # the delay is known; the rest of the run adds nothing
            ctx.store.close()
            return rounds, alarms, significant, first

    print(f"== quality: DriftCheck, {rate} events/s, {len(feats)} numeric features, pinned reference 5000 "
          f"events, window {window_secs:.0f}s, sustained {sustained_secs:.0f}s, evaluation every "
          f"{eval_secs:.0f}s ==")
    t0 = time.perf_counter()
    rounds, alarms, significant, _ = run(seed, hours * 3600, None, 0.0)
    per_day = alarms * 24 / hours
    print(f"no drift, {hours:g} h replayed (seed {seed}): {rounds} evaluations x {len(feats)} features; "
          f"evaluations with an active finding: {alarms} -> {per_day:.2f} false alarms/day; evaluations with "
          f"BH p < 0.01 alone (no effect floor, no sustain): {significant} "
          f"({time.perf_counter() - t0:.0f}s wall)")
    t0 = time.perf_counter()
    shift_at = 600.0
    delays = [run(seed + k, 2 * window_secs + sustained_secs + 1200, shift_at, 0.2)[3] for k in range(seeds)]
    found = sorted(d for d in delays if d is not None)
    shown = ", ".join("missed" if d is None else f"{d:.0f}" for d in delays)
    summary = (f"median {float(np.median(found)):.0f}s, max {max(found):.0f}s" if found else "never found")
    print(f"0.2-sd mean shift of one feature at t={shift_at:.0f}s, {seeds} seeds ({seed}..{seed + seeds - 1}): "
          f"first active finding after {shown} s -> {summary}; missed {len(delays) - len(found)} "
          f"(the delay includes the {sustained_secs:.0f}s sustained rule; {time.perf_counter() - t0:.0f}s wall)")


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--quick", action="store_true")
    p.add_argument("--section", choices=("speed", "quality", "all"), default="all")
    p.add_argument("--hours", type=float, default=6.0, help="no-drift traffic to replay (quality)")
    p.add_argument("--seeds", type=int, default=5, help="seeds of the detection-delay run (quality)")
    p.add_argument("--repeat", type=int, default=3, help="timed runs of ours (speed; the median is shown)")
    p.add_argument("--window-secs", type=float, default=1800.0)
    p.add_argument("--sustained-secs", type=float, default=600.0)
    p.add_argument("--eval-secs", type=float, default=60.0)
    p.add_argument("--seed", type=int, default=0)
    a = p.parse_args()
    if a.section in ("speed", "all"):
        if a.quick:
            speed(50, 200_000, 20_000, a.seed, a.repeat)
        else:
            speed(50, 1_000_000, 100_000, a.seed, a.repeat)
    if a.section in ("quality", "all"):
        quality(2.0 if a.quick else a.hours, a.seed, 2 if a.quick else a.seeds, a.window_secs,
                a.sustained_secs, a.eval_secs)


if __name__ == "__main__":
    main()
