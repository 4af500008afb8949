"""The drift decision: per feature a test, per model/version Benjamini-Hochberg, effect floors and sustain.

Numeric features get a two-sample KS test, categorical ones a chi-square test (unseen categories pooled and
reported) with PSI as the effect size; the p-values of all the model/version's features are BH-adjusted
together; a feature's *condition* holds when the adjusted p is below ``p_threshold`` AND the effect (KS D or
PSI) is at least its floor. A finding is ``active`` only once the condition has held for ``sustained_secs``;
the since-time is persisted so a restart does not restart the clock. A rise of the missing/NaN ratio is its
own finding (``test="missing"``): missing values never enter a statistic.
"""

from __future__ import annotations

import math
import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import TypeVar

from prometheus_client import Counter

from sidecar.checks.drift.persistence import DriftStore, key
from sidecar.checks.drift_config import DriftConfig
from sidecar.checks.references import Reference
from sidecar.checks.stats import KsResult, benjamini_hochberg, chi_square, ks_2samp_fast, psi_numeric
from sidecar.checks.windows import WindowSnapshot
from sidecar.model import Finding

__all__ = ["Evaluator", "FeatureResult", "SinceKey", "ks_job"]

SinceKey = tuple[str, str, str, str]
_T = TypeVar("_T")


@dataclass(frozen=True)
class FeatureResult:
    feature: str
    test: str  # ks | chi2 | missing
    statistic: float
    p: float
    effect: float
    n_cur: int
    n_ref: int
    missing_ratio: float
    ref_missing_ratio: float
    psi: float = math.nan
    unseen_ratio: float = math.nan
    detail: str = ""
    insufficient: str = ""


def ks_job(job: tuple[Reference, WindowSnapshot]) -> tuple[KsResult, float]:
    """One numeric feature's KS test and PSI (runs in a pool thread; sorts the current window there)."""
    ref, snap = job
    cur = snap.distribution()
    if ref.ecdf is None or cur is None:
        raise ValueError("numeric test without a numeric distribution")
    return ks_2samp_fast(ref.ecdf, cur), psi_numeric(ref.ecdf, cur)


class Evaluator:
    """Owns the since-times (guarded by the check's lock, shared with ``observe``)."""

    def __init__(self, cfg: DriftConfig, lock: threading.RLock, store: DriftStore, dropped: Counter,
                 check_name: str) -> None:
        self.cfg = cfg
        self.lock = lock
        self.store = store
        self.dropped = dropped
        self.check_name = check_name
        self.since: dict[SinceKey, float] = {}

    def ks_ready(self, cur: WindowSnapshot, ref: Reference) -> bool:
        return (cur.kind == "numeric" and ref.ecdf is not None
                and cur.n >= self.cfg.min_samples and ref.n >= self.cfg.min_samples)

    def map(self, fn: Callable[[tuple[Reference, WindowSnapshot]], _T],
            jobs: list[tuple[Reference, WindowSnapshot]]) -> list[_T]:
        """Runs the per-feature tests in ``eval_threads`` threads (numpy's sort and search release the GIL)."""
        threads = min(self.cfg.eval_threads, len(jobs))
        if threads <= 1:
            return [fn(j) for j in jobs]
        with ThreadPoolExecutor(max_workers=threads, thread_name_prefix="drift-eval") as pool:
            return list(pool.map(fn, jobs))

    def test(self, feature: str, cur: WindowSnapshot, ref: Reference | str,
             ks_done: tuple[KsResult, float] | None = None) -> list[FeatureResult]:
        miss = cur.missing_ratio
        if isinstance(ref, str):
            return [FeatureResult(feature, "ks" if cur.kind == "numeric" else "chi2", math.nan, math.nan,
                                  math.nan, cur.n, 0, miss, math.nan, insufficient=ref)]
        out: list[FeatureResult] = []
        if cur.total >= self.cfg.min_samples and not math.isnan(ref.missing_ratio):
            inc = miss - ref.missing_ratio
            out.append(FeatureResult(feature, "missing", miss, math.nan, inc, cur.n, ref.n, miss,
                                     ref.missing_ratio,
                                     detail=f"missing {miss:.1%} vs {ref.missing_ratio:.1%}"))
        if cur.n < self.cfg.min_samples or ref.n < self.cfg.min_samples:
            test = "ks" if cur.kind == "numeric" else "chi2"
            out.append(FeatureResult(feature, test, math.nan, math.nan, math.nan, cur.n, ref.n, miss,
                                     ref.missing_ratio,
                                     insufficient=f"{cur.n} current / {ref.n} reference values "
                                                  f"(need {self.cfg.min_samples})"))
            return out
        if ks_done is not None:
            ks, psi = ks_done
            out.append(FeatureResult(feature, "ks", ks.d, ks.p, ks.d, cur.n, ref.n, miss, ref.missing_ratio,
                                     psi=psi, detail=f"KS D={ks.d:.4f} ({ks.method})"))
        elif cur.counts is not None and ref.counts is not None:
            cs = chi_square(ref.counts, cur.counts)
            unseen = f"; new categories {', '.join(cs.unseen_categories)} ({cs.unseen_rate:.1%})" \
                if cs.unseen_count else ""
            out.append(FeatureResult(feature, "chi2", cs.statistic, cs.p, cs.psi, cur.n, ref.n, miss,
                                     ref.missing_ratio, psi=cs.psi, unseen_ratio=cs.unseen_rate,
                                     detail=f"chi2={cs.statistic:.1f} dof={cs.dof} PSI={cs.psi:.3f}{unseen}"))
        else:
            self.dropped.labels("kind_mismatch").inc()
        return out

    def decide(self, model: str, version: str, results: list[FeatureResult], now: float,
               export: Callable[[str, str, FeatureResult, float, bool, bool], None]) -> list[Finding]:
        tested = [i for i, r in enumerate(results) if r.test in ("ks", "chi2") and not math.isnan(r.p)]
        qs = benjamini_hochberg([results[i].p for i in tested])
        q_by = dict(zip(tested, qs, strict=True))
        out: list[Finding] = []
        cfg = self.cfg
        for i, r in enumerate(results):
            labels = {"model": model, "version": version, "feature": r.feature, "test": r.test}
            skey = (model, version, r.feature, r.test)
            q = q_by.get(i, math.nan)
            if r.test == "missing":
                condition = r.effect >= cfg.missing_ratio_increase
                floor = cfg.missing_ratio_increase
            else:
                floor = cfg.ks_effect_floor if r.test == "ks" else cfg.psi_effect_floor
                condition = (not r.insufficient and q < cfg.p_threshold and r.effect >= floor)
            since_v = self._hold(skey, condition, now)
            active = condition and since_v is not None and now - since_v >= cfg.sustained_secs
            export(model, version, r, q, condition, active)
            held = f"; condition held {now - since_v:.0f}s of {cfg.sustained_secs:.0f}s" \
                if since_v is not None else ""
            if r.insufficient:
                summary = f"drift {model} v{version} {r.feature}: insufficient data ({r.insufficient})"
            elif r.test == "missing":
                summary = f"missing values {model} v{version} {r.feature}: {r.detail}{held}"
            else:
                summary = (f"drift {model} v{version} {r.feature}: {r.detail}, p(BH)={q:.3g}, "
                           f"n={r.n_cur} vs {r.n_ref}{held}")
            out.append(Finding(
                check=self.check_name, kind="drift", labels=labels, active=active,
                value=None if math.isnan(r.statistic) else r.statistic, threshold=cfg.p_threshold,
                p_value=None if math.isnan(q) else q, effect_size=None if math.isnan(r.effect) else r.effect,
                window_secs=cfg.window_secs, summary=summary, evaluated_at=now,
                insufficient_data=bool(r.insufficient),
                description=f"effect floor {floor}; missing ratio {r.missing_ratio:.3f} "
                            f"(reference {r.ref_missing_ratio:.3f})",
                # The same runbooks the Prometheus rules link to (docs/runbooks/).
                annotations={"runbook": "FeatureMissingValuesHigh.md" if r.test == "missing"
                             else "FeatureDrifting.md",
                             "condition": str(condition).lower(),
                             **({"condition_since": f"{since_v:.0f}"} if since_v is not None else {})},
            ))
        return out

    def _hold(self, skey: SinceKey, condition: bool, now: float) -> float | None:
        """Starts, keeps or clears the since-time of one series' condition; returns it."""
        with self.lock:
            if condition:
                since = self.since.setdefault(skey, now)
                if since == now:
                    self.store.save("drift.since", key(*skey), repr(now).encode())
            elif skey in self.since:
                del self.since[skey]
                self.store.delete("drift.since", key(*skey))
            return self.since.get(skey)

    def forget(self, match: Callable[[SinceKey], bool]) -> None:
        """Drops the since-times whose key matches (caller holds the lock)."""
        for sk in [k for k in self.since if match(k)]:
            del self.since[sk]
            self.store.delete("drift.since", key(*sk))
