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
from dataclasses import dataclass, field
from typing import TypeVar

from prometheus_client import Counter

from sidecar.checks.drift.config import DriftConfig
from sidecar.checks.drift.persistence import DriftStore, key
from sidecar.checks.drift.references import Reference
from sidecar.checks.drift.refs import NoReference
from sidecar.checks.stats.core import KsResult, benjamini_hochberg, chi_square, ks_2samp_fast, psi_numeric
from sidecar.checks.stats.windows import WindowSnapshot
from sidecar.facts import DriftBlock, DriftFacts, DriftReference
from sidecar.model import Finding

__all__ = ["Evaluator", "Facts", "FeatureResult", "SinceKey", "drift_facts", "ks_job", "look_block", "reference_facts"]

SinceKey = tuple[str, str, str, str]
_T = TypeVar("_T")


Facts = dict[str, float | int | str | None]
_MAX_UNSEEN_NAMED = 10  # new category names carried in a finding's facts (the rest are counted only)


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
    # Test-specific numbers and tokens (KS method, chi-square dof, new categories) for the renderer.
    extra: Facts = field(default_factory=dict)
    insufficient: str = ""  # a reason code (too_few_samples, collecting, ...); empty when the test ran
    insufficient_facts: Facts = field(default_factory=dict)
    reference: DriftReference | None = None


def reference_facts(ref: Reference) -> DriftReference:
    """Which reference a test compared against: its source and when it froze name it."""
    return DriftReference(f"{ref.source}@{ref.created_at:.0f}", ref.n, ref.source, ref.created_at)


def _num(v: float) -> float | None:
    return None if math.isnan(v) else v


def look_block(r: FeatureResult, q: float, start: float | None, end: float, level: float, drifted: bool) -> DriftBlock:
    """One look's figures as a finding carries them (NaN, not computed, becomes None)."""
    dof, count = r.extra.get("dof"), r.extra.get("unseen_count")
    return DriftBlock(
        start,
        end,
        r.n_cur,
        r.n_ref,
        _num(r.statistic),
        _num(r.effect),
        _num(r.p),
        _num(q),
        level,
        drifted,
        dof=int(dof) if isinstance(dof, int | float) else None,
        unseen=str(r.extra["unseen"]) if "unseen" in r.extra and isinstance(count, int | float) and count else None,
        unseen_ratio=_num(r.unseen_ratio),
    )


def drift_facts(r: FeatureResult, q: float, floor: float, condition: bool, **kw: object) -> DriftFacts:
    """The facts of one drift finding: the latest look's figures flat, the rest (evidence, decision) from ``kw``."""
    extra = dict(r.insufficient_facts)
    return DriftFacts(
        test=r.test,
        floor=floor,
        condition=condition,
        statistic=_num(r.statistic),
        p_raw=_num(r.p),
        q=_num(q),
        effect=_num(r.effect),
        psi=_num(r.psi),
        unseen_ratio=_num(r.unseen_ratio),
        n_cur=r.n_cur,
        n_ref=r.n_ref,
        missing_ratio=_num(r.missing_ratio),
        ref_missing_ratio=_num(r.ref_missing_ratio),
        reference=r.reference,
        method=str(r.extra["method"]) if "method" in r.extra else None,
        dof=int(d) if isinstance(d := r.extra.get("dof"), int | float) else None,
        unseen_count=int(u) if isinstance(u := r.extra.get("unseen_count"), int | float) else None,
        unseen=str(r.extra["unseen"]) if "unseen" in r.extra else None,
        insufficient=r.insufficient or None,
        extra=extra,
        **kw,  # type: ignore[arg-type]
    )


def ks_job(job: tuple[Reference, WindowSnapshot]) -> tuple[KsResult, float]:
    """One numeric feature's KS test and PSI (runs in a pool thread; sorts the current window there)."""
    ref, snap = job
    cur = snap.distribution()
    if ref.ecdf is None or cur is None:
        raise ValueError("numeric test without a numeric distribution")
    return ks_2samp_fast(ref.ecdf, cur), psi_numeric(ref.ecdf, cur)


class Evaluator:
    """Owns the since-times (guarded by the check's lock, shared with ``observe``)."""

    def __init__(
        self, cfg: DriftConfig, lock: threading.RLock, store: DriftStore, dropped: Counter, check_name: str
    ) -> None:
        self.cfg = cfg
        self.lock = lock
        self.store = store
        self.dropped = dropped
        self.check_name = check_name
        self.since: dict[SinceKey, float] = {}

    def ks_ready(self, cur: WindowSnapshot, ref: Reference) -> bool:
        return (
            cur.kind == "numeric"
            and ref.ecdf is not None
            and cur.n >= self.cfg.min_samples
            and ref.n >= self.cfg.min_samples
        )

    def map(
        self, fn: Callable[[tuple[Reference, WindowSnapshot]], _T], jobs: list[tuple[Reference, WindowSnapshot]]
    ) -> list[_T]:
        """Runs the per-feature tests in ``eval_threads`` threads (numpy's sort and search release the GIL)."""
        threads = min(self.cfg.eval_threads, len(jobs))
        if threads <= 1:
            return [fn(j) for j in jobs]
        with ThreadPoolExecutor(max_workers=threads, thread_name_prefix="drift-eval") as pool:
            return list(pool.map(fn, jobs))

    def test(
        self,
        feature: str,
        cur: WindowSnapshot,
        ref: Reference | NoReference,
        ks_done: tuple[KsResult, float] | None = None,
    ) -> list[FeatureResult]:
        miss = cur.missing_ratio
        if isinstance(ref, NoReference):
            return [
                FeatureResult(
                    feature,
                    "ks" if cur.kind == "numeric" else "chi2",
                    math.nan,
                    math.nan,
                    math.nan,
                    cur.n,
                    0,
                    miss,
                    math.nan,
                    insufficient=ref.reason,
                    insufficient_facts=dict(ref.facts),
                )
            ]
        out: list[FeatureResult] = []
        rf = reference_facts(ref)
        if cur.total >= self.cfg.min_samples and not math.isnan(ref.missing_ratio):
            inc = miss - ref.missing_ratio
            out.append(
                FeatureResult(
                    feature, "missing", miss, math.nan, inc, cur.n, ref.n, miss, ref.missing_ratio, reference=rf
                )
            )
        if cur.n < self.cfg.min_samples or ref.n < self.cfg.min_samples:
            test = "ks" if cur.kind == "numeric" else "chi2"
            out.append(
                FeatureResult(
                    feature,
                    test,
                    math.nan,
                    math.nan,
                    math.nan,
                    cur.n,
                    ref.n,
                    miss,
                    ref.missing_ratio,
                    insufficient="too_few_samples",
                    insufficient_facts={"min_samples": self.cfg.min_samples},
                    reference=rf,
                )
            )
            return out
        if ks_done is not None:
            ks, psi = ks_done
            out.append(
                FeatureResult(
                    feature,
                    "ks",
                    ks.d,
                    ks.p,
                    ks.d,
                    cur.n,
                    ref.n,
                    miss,
                    ref.missing_ratio,
                    psi=psi,
                    extra={"method": ks.method},
                    reference=rf,
                )
            )
        elif cur.counts is not None and ref.counts is not None:
            cs = chi_square(ref.counts, cur.counts)
            out.append(
                FeatureResult(
                    feature,
                    "chi2",
                    cs.statistic,
                    cs.p,
                    cs.psi,
                    cur.n,
                    ref.n,
                    miss,
                    ref.missing_ratio,
                    psi=cs.psi,
                    unseen_ratio=cs.unseen_rate,
                    extra={
                        "dof": cs.dof,
                        "unseen_count": cs.unseen_count,
                        "unseen": ", ".join(cs.unseen_categories[:_MAX_UNSEEN_NAMED]),
                    },
                    reference=rf,
                )
            )
        else:
            self.dropped.labels("kind_mismatch").inc()
        return out

    def decide(
        self,
        model: str,
        version: str,
        results: list[FeatureResult],
        now: float,
        export: Callable[[str, str, FeatureResult, float, bool, bool], None],
    ) -> list[Finding]:
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
                condition = not r.insufficient and q < cfg.p_threshold and r.effect >= floor
            since_v = self._hold(skey, condition, now)
            active = condition and since_v is not None and now - since_v >= cfg.sustained_secs
            export(model, version, r, q, condition, active)
            out.append(
                Finding(
                    check=self.check_name,
                    kind="drift",
                    labels=labels,
                    active=active,
                    value=None if math.isnan(r.statistic) else r.statistic,
                    threshold=cfg.p_threshold,
                    p_value=None if math.isnan(q) else q,
                    effect_size=None if math.isnan(r.effect) else r.effect,
                    window_secs=cfg.window_secs,
                    evaluated_at=now,
                    insufficient_data=bool(r.insufficient),
                    facts=drift_facts(
                        r,
                        q,
                        floor,
                        condition,
                        decision="window",
                        now=(look := look_block(r, q, now - cfg.window_secs, now, cfg.p_threshold, condition)),
                        evidence=(look,) if active else (),
                        held_secs=None if since_v is None else now - since_v,
                        sustained_secs=cfg.sustained_secs,
                        condition_since=since_v,
                    ),
                    # The same runbooks the Prometheus rules link to (docs/runbooks/).
                    annotations={
                        "runbook": "FeatureMissingValuesHigh.md" if r.test == "missing" else "FeatureDrifting.md",
                        "condition": str(condition).lower(),
                        **({"condition_since": f"{since_v:.0f}"} if since_v is not None else {}),
                    },
                )
            )
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
