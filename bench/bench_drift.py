"""Drift benchmark: ours against a plain scipy loop (and alibi-detect / Evidently when installed), in one run.

    .venv/bin/python bench/bench_drift.py            # 50 features, 1,000,000 reference rows, 100,000 current
    .venv/bin/python bench/bench_drift.py --quick    # 50 features, 200,000 / 20,000 (a smoke run)
    .venv/bin/python bench/bench_drift.py --section quality    # 9 seeds per delay row, 7 replayed days
    /work/peers-venv/bin/python bench/bench_drift.py --peers   # + alibi-detect and Evidently (pip install .[bench])

Sections: ``speed`` (per-evaluation time, agreement of D and p to 1e-9, bounded-memory sketch mode against
exact mode and against datasketches' own ks_test) and ``quality`` (bench/drift_quality.py: detection delays
of mean, variance, category and NaN changes against effect size and event rate, and false alarms over days of
replayed no-drift traffic, for the baseline method 'window' and 'multiscale' in one run).

``--peers`` adds one evaluation each of the scipy loop, ours, alibi-detect's ``KSDrift`` and Evidently's
``DataDriftPreset(num_method="ks")``, each in a fresh subprocess that regenerates the same data from the seed,
so that each method's peak RSS (VmHWM) is its own. The peers are an optional extra (``bench``), never
runtime dependencies; they are slow (Evidently ~1-2 minutes) and heavy (alibi-detect pulls transformers).
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import resource
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import cast

import numpy as np
from datasketches import ks_test
from scipy import stats as sps

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from sidecar.checks.drift.config import DriftConfig
from sidecar.checks.stats.core import Ecdf, KsResult, benjamini_hochberg, ks_many
from sidecar.checks.stats.sketch import kll_to_ecdf, kll_update, new_kll

SHIFTED = (3, 11, 19, 27, 35)  # features whose current mean moves by 0.1 sd


def _rss_mib() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0


def _proc_status_mib(field: str) -> float:
    """VmRSS / VmHWM of this process from /proc (Linux), NaN elsewhere.

    Not ``ru_maxrss`` in the workers: Linux keeps ru_maxrss across fork and execve, so a subprocess would
    report at least the parent's RSS at the fork; VmHWM belongs to the new address space alone.
    """
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith(field + ":"):
                return int(line.split()[1]) / 1024.0
    except OSError:
        pass
    return float("nan")


def _median_time(fn: Callable[[], object], repeat: int) -> tuple[float, object]:
    times, out = [], None
    for _ in range(repeat):
        t0 = time.perf_counter()
        out = fn()
        times.append(time.perf_counter() - t0)
    return float(np.median(times)), out


def _make_data(n_features: int, n_ref: int, n_cur: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """(features, rows) arrays; the same seed gives the same numbers in every process."""
    rng = np.random.default_rng(seed)
    ref = rng.normal(size=(n_features, n_ref))
    cur = rng.normal(size=(n_features, n_cur))
    for j in SHIFTED:
        if j < n_features:
            cur[j] += 0.1
    return ref, cur


PEER_METHODS = ("scipy", "ours", "alibi", "evidently")
_PEER_MODULES = {"alibi": "alibi_detect", "evidently": "evidently"}


def _peer_worker(method: str, n_features: int, n_ref: int, n_cur: int, seed: int, out: str) -> None:
    """One evaluation of one method in this (fresh) process; writes D, p, times and peak RSS to ``out``.

    Preparation that a live monitor would do once per reference (our reference sort, alibi's detector,
    Evidently's reference Dataset) is timed apart from the evaluation.
    """
    ref, cur = _make_data(n_features, n_ref, n_cur, seed)
    rss_data = _proc_status_mib("VmRSS")
    d = np.full(n_features, np.nan)
    p = np.full(n_features, np.nan)
    version = ""
    t_prep = 0.0
    if method == "scipy":
        t0 = time.perf_counter()
        res = [sps.ks_2samp(ref[j], cur[j]) for j in range(n_features)]
        t_eval = time.perf_counter() - t0
        d[:] = [float(r.statistic) for r in res]
        p[:] = [float(r.pvalue) for r in res]
        import scipy

        version = f"scipy {scipy.__version__}"
    elif method == "ours":
        t0 = time.perf_counter()
        # The reference is handed over and sorted where it lies, as a live monitor keeps only the sorted one.
        refs = [Ecdf.from_values(ref[j], in_place=True) for j in range(n_features)]
        t_prep = time.perf_counter() - t0
        curs = [cur[j] for j in range(n_features)]
        t0 = time.perf_counter()
        ours = ks_many(refs, curs, workers=1)
        t_eval = time.perf_counter() - t0
        d[:] = [o.d for o in ours]
        p[:] = [o.p for o in ours]
        version = "sidecar.checks.stats.core.ks_many, 1 thread"
    elif method == "alibi":
        import alibi_detect
        from alibi_detect.cd import KSDrift

        version = f"alibi-detect {alibi_detect.__version__}"
        t0 = time.perf_counter()
        # ref.T is a (rows, features) view whose columns are contiguous: no copy of the reference here.
        detector = KSDrift(ref.T, p_val=0.01, correction="bonferroni")
        t_prep = time.perf_counter() - t0
        t0 = time.perf_counter()
        pred = detector.predict(cur.T, return_p_val=True, return_distance=True)
        t_eval = time.perf_counter() - t0
        d[:] = np.asarray(pred["data"]["distance"], dtype=np.float64)
        p[:] = np.asarray(pred["data"]["p_val"], dtype=np.float64)
    elif method == "evidently":
        import evidently
        import pandas as pd
        from evidently import DataDefinition, Dataset, Report
        from evidently.presets import DataDriftPreset

        version = f"evidently {evidently.__version__}"
        cols = [f"f{j}" for j in range(n_features)]
        definition = DataDefinition(numerical_columns=cols)
        t0 = time.perf_counter()
        ref_ds = Dataset.from_pandas(pd.DataFrame(ref.T, columns=cols), data_definition=definition)
        t_prep = time.perf_counter() - t0
        t0 = time.perf_counter()
        cur_ds = Dataset.from_pandas(pd.DataFrame(cur.T, columns=cols), data_definition=definition)
        snapshot = Report([DataDriftPreset(num_method="ks")]).run(cur_ds, ref_ds)
        t_eval = time.perf_counter() - t0
        # Evidently 0.7 reports one ValueDrift metric per column whose value is the KS p-value; it has no D.
        for m in snapshot.dict()["metrics"]:
            col = m.get("config", {}).get("column")
            if m.get("config", {}).get("type", "").endswith(":ValueDrift") and col in cols:
                p[cols.index(col)] = float(m["value"])
    else:
        raise SystemExit(f"unknown method {method}")
    np.savez(
        out,
        d=d,
        p=p,
        t_eval=t_eval,
        t_prep=t_prep,
        rss_data=rss_data,
        rss_peak=_proc_status_mib("VmHWM"),
        version=np.array(version),
    )


def _run_peer(method: str, n_features: int, n_ref: int, n_cur: int, seed: int) -> dict[str, object] | str:
    """Runs ``_peer_worker`` in a fresh interpreter; returns its results, or why there are none."""
    mod = _PEER_MODULES.get(method)
    if mod is not None and importlib.util.find_spec(mod) is None:
        return f"{mod} not installed in {sys.executable} (pip install '.[bench]')"
    with tempfile.TemporaryDirectory() as tmp:
        out = str(Path(tmp) / "r.npz")
        cmd = [
            sys.executable,
            str(Path(__file__).resolve()),
            "--peer-worker",
            method,
            "--peer-out",
            out,
            "--peer-sizes",
            f"{n_features},{n_ref},{n_cur}",
            "--seed",
            str(seed),
        ]
        proc = subprocess.run(cmd, capture_output=True, text=True, check=False)
        if proc.returncode != 0 or not Path(out).exists():
            tail = (proc.stderr or proc.stdout).strip().splitlines()[-3:]
            return f"failed (exit {proc.returncode}): {' | '.join(tail)}"
        with np.load(out) as z:
            return {k: z[k] for k in z.files}


def peers(
    n_features: int,
    n_ref: int,
    n_cur: int,
    seed: int,
    t_one: float,
    t_two: float,
    ours: list[KsResult],
    scipy_res: list[object],
) -> None:
    print(
        f"== peers: one evaluation each, every method in its own fresh process (same data from seed {seed}); "
        f"peak RSS = that process's VmHWM, which includes the interpreter, imports and the data itself =="
    )
    d_ours = np.array([o.d for o in ours])
    p_ours = np.array([o.p for o in ours])
    p_scipy = np.array([float(cast(tuple[float, float], r)[1]) for r in scipy_res])
    print(
        f"{'method':44s} {'evaluation':>11s} {'one-off prep':>13s} {'peak RSS':>10s} {'data alone':>11s} "
        f"{'vs ours 1t':>11s} {'vs ours 2t':>11s}"
    )
    results: dict[str, dict[str, object]] = {}
    for method in PEER_METHODS:
        t0 = time.perf_counter()
        r = _run_peer(method, n_features, n_ref, n_cur, seed)
        wall = time.perf_counter() - t0
        if isinstance(r, str):
            print(f"{method:44s} {r}")
            continue
        results[method] = r
        t_eval = float(cast(np.ndarray, r["t_eval"]))
        label = f"{method}: {r['version']}"
        print(
            f"{label:44s} {t_eval:10.3f}s {float(cast(np.ndarray, r['t_prep'])):12.3f}s "
            f"{float(cast(np.ndarray, r['rss_peak'])):7.0f} MiB {float(cast(np.ndarray, r['rss_data'])):7.0f} MiB "
            f"{t_eval / t_one:10.1f}x {t_eval / t_two:10.1f}x   ({wall:.0f}s wall incl. start-up)"
        )
    print(
        f"  (ours in this table's ratios: the in-process median above, 1 thread {t_one:.3f}s, 2 threads {t_two:.3f}s)"
    )

    def agree(name: str, ours_v: np.ndarray, theirs: np.ndarray, what: str, verdict: bool = True) -> None:
        diff = float(np.max(np.abs(ours_v - theirs)))
        tail = f"{'OK' if diff <= 1e-9 else 'MISMATCH'} at 1e-9" if verdict else "float32 output, see below"
        print(f"  {name} vs {what}: max |d| = {diff:.3g} ({tail})")

    for method, r in results.items():
        d_r, p_r = cast(np.ndarray, r["d"]), cast(np.ndarray, r["p"])
        if method in ("scipy", "ours"):
            agree(f"{method} (subprocess) D", d_ours, d_r, "ours D (in-process)")
            agree(f"{method} (subprocess) p", p_ours, p_r, "ours p (in-process)")
        elif method == "alibi":
            # alibi-detect stores distance and p_val in float32 arrays, so 1e-9 cannot hold on its output;
            # what can be checked exactly is that they are our (and scipy's) float64 numbers rounded to float32.
            agree("alibi D", d_ours, d_r, "ours D (float64)", verdict=False)
            agree("alibi p", p_ours, p_r, "ours p (float64)", verdict=False)
            same_d = int(np.sum(d_r == d_ours.astype(np.float32).astype(np.float64)))
            same_p = int(np.sum(p_r == p_ours.astype(np.float32).astype(np.float64)))
            same_ps = int(np.sum(p_r == p_scipy.astype(np.float32).astype(np.float64)))
            # p below float32's smallest normal (1.2e-38; the shifted features' p is ~1e-100) is flushed to 0
            # by the float32 store, so the relative difference is taken over the representable ones only.
            normal = p_ours >= np.finfo(np.float32).tiny
            rel = float(np.max(np.abs(p_r - p_ours)[normal] / p_ours[normal])) if normal.any() else 0.0
            print(
                f"  alibi outputs are float32: D == float32(ours D) for {same_d}/{n_features} features, "
                f"p == float32(ours p) for {same_p}/{n_features}, p == float32(scipy p) for "
                f"{same_ps}/{n_features}; max relative |dp| = {rel:.3g} over the {int(normal.sum())} p >= 1.2e-38 "
                f"(float32 eps 2^-24 = {2.0**-24:.3g}); {int((~normal).sum())} smaller p stored as 0 by alibi"
            )
        elif method == "evidently":
            # Evidently calls scipy.stats.ks_2samp(reference, current) with scipy's defaults: p only, float64.
            missing = int(np.sum(np.isnan(p_r)))
            if missing:
                print(f"  evidently: no p-value found for {missing} of {n_features} features")
            agree("evidently p", p_scipy, p_r, "scipy p")
            agree("evidently p", p_ours, p_r, "ours p")


def speed(n_features: int, n_ref: int, n_cur: int, seed: int, repeat: int, with_peers: bool) -> None:
    ref, cur = _make_data(n_features, n_ref, n_cur, seed)
    print(
        f"== speed: {n_features} numeric features, reference {n_ref:,} rows, current {n_cur:,} rows; "
        f"{os.cpu_count()} CPUs; ours: median of {repeat} =="
    )

    t0 = time.perf_counter()
    scipy_res = [sps.ks_2samp(ref[j], cur[j]) for j in range(n_features)]
    t_scipy = time.perf_counter() - t0

    t0 = time.perf_counter()
    refs = [Ecdf.from_values(ref[j], in_place=True) for j in range(n_features)]  # no second copy held
    t_sort = time.perf_counter() - t0
    # "ours" starts from the unsorted current rows, as the live check does: sorting them is part of the work.
    curs = [cur[j] for j in range(n_features)]
    t_one, ours_one = _median_time(lambda: ks_many(refs, curs, workers=1), repeat)
    t_two, ours_two = _median_time(lambda: ks_many(refs, curs, workers=2), repeat)

    print(f"{'method':62s} {'per evaluation':>15s}")
    print(f"{'scipy.stats.ks_2samp loop (baseline)':62s} {t_scipy:14.3f}s")
    for label, t in (
        ("ours, 1 thread (sorted reference, sort+search current, vector p)", t_one),
        ("ours, 2 threads (the same, features spread over a pool)", t_two),
    ):
        print(f"{label:62s} {t:14.3f}s   ratio {t_scipy / t:5.1f}x faster")
    print(f"{'  (one-off reference sort, at reference load)':62s} {t_sort:14.3f}s")
    for label, ours in (("1 thread", ours_one), ("2 threads", ours_two)):
        res = cast(list[KsResult], ours)
        dd = max(abs(o.d - float(s.statistic)) for o, s in zip(res, scipy_res, strict=True))
        dp = max(abs(o.p - float(s.pvalue)) for o, s in zip(res, scipy_res, strict=True))
        print(
            f"agreement with scipy ({label}): max |dD| = {dd:.3g}, max |dp| = {dp:.3g} "
            f"({'OK' if dd <= 1e-9 and dp <= 1e-9 else 'MISMATCH'} at 1e-9)"
        )
    ours = cast(list[KsResult], ours_one)

    if with_peers:
        peers(n_features, n_ref, n_cur, seed, t_one, t_two, ours, cast(list[object], scipy_res))
    else:
        found = [m for m in _PEER_MODULES.values() if importlib.util.find_spec(m) is not None]
        print(f"peers (alibi-detect, Evidently): not run; add --peers (installed here: {found or 'none'})")

    # Bounded-memory mode: KLL sketches of both sides, tested with the real n's.
    k = DriftConfig().kll_k  # the default memory
    t0 = time.perf_counter()
    ref_sk, cur_sk = [], []
    for j in range(n_features):
        a, b = new_kll(k), new_kll(k)
        kll_update(a, ref[j])
        kll_update(b, cur[j])
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
    size = float(np.mean([len(s.serialize()) for s in ref_sk + cur_sk]))
    print(
        f"sketch mode (KLL k={k}, float32 items, {size / 1024:.1f} KiB per serialized sketch on average): "
        f"build {t_build:.3f}s (once per window), test {t_sk:.3f}s; max |D_sketch - D_exact| = {derr:.4f} "
        f"over {n_features} features (bound used for the p-value: eps_ref + eps_cur = {sk[0].d_error:.4f}, "
        f"KLL's single-sided normalized rank error at ~99% confidence per sketch)"
    )
    print(f"  shifted features (0.1 sd): {sorted(j for j in SHIFTED if j < n_features)}")
    print(
        f"  exact mode flags {sorted(exact_found)}; sketch mode flags {sorted(sk_found)}; "
        f"datasketches ks_test flags {sorted(ds_found)}"
    )
    print(f"peak RSS so far: {_rss_mib():.0f} MiB")


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--quick", action="store_true")
    p.add_argument("--section", choices=("speed", "quality", "all"), default="all")
    p.add_argument("--days", type=float, default=7.0, help="no-drift traffic to replay (quality)")
    p.add_argument(
        "--offset-days",
        type=float,
        default=7.0,
        help="the rolling reference's offset, replayed first as history (quality)",
    )
    p.add_argument("--seeds", type=int, default=9, help="seeds of each detection-delay row (quality)")
    p.add_argument("--no-false-alarms", action="store_true", help="skip the days of no-drift traffic (quality)")
    p.add_argument("--no-delays", action="store_true", help="skip the detection-delay rows (quality)")
    p.add_argument("--method", choices=("window", "multiscale"), help="only this method (quality)")
    p.add_argument("--repeat", type=int, default=3, help="timed runs of ours (speed; the median is shown)")
    p.add_argument("--window-secs", type=float, default=1800.0)
    p.add_argument("--sustained-secs", type=float, default=600.0)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument(
        "--jobs",
        type=int,
        default=os.cpu_count() or 1,
        help="worker processes for the quality section's independent replays (default: one per CPU)",
    )
    p.add_argument(
        "--peers",
        action="store_true",
        help="also run the scipy loop, ours, alibi-detect and Evidently once each in subprocesses (speed)",
    )
    p.add_argument("--peer-worker", choices=PEER_METHODS, help=argparse.SUPPRESS)
    p.add_argument("--peer-out", help=argparse.SUPPRESS)
    p.add_argument("--peer-sizes", help=argparse.SUPPRESS)
    a = p.parse_args()
    if a.peer_worker:
        nf, nr, nc = (int(x) for x in a.peer_sizes.split(","))
        _peer_worker(a.peer_worker, nf, nr, nc, a.seed, a.peer_out)
        return
    if a.section in ("speed", "all"):
        if a.quick:
            speed(50, 200_000, 20_000, a.seed, a.repeat, a.peers)
        else:
            speed(50, 1_000_000, 100_000, a.seed, a.repeat, a.peers)
    if a.section in ("quality", "all"):
        from drift_quality import quality

        quality(
            0.25 if a.quick else a.days,
            1.0 if a.quick else a.offset_days,
            a.seed,
            2 if a.quick else a.seeds,
            a.window_secs,
            a.sustained_secs,
            a.no_false_alarms,
            a.no_delays,
            a.method,
            a.jobs,
        )


if __name__ == "__main__":
    main()
