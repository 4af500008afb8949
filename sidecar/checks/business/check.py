"""Business-metric checks: an aggregate of an event field over a window, vs a baseline window or a threshold.

This module is the component: it takes events off the bus into the series registry (``business_series``),
evaluates each series every round (``business_eval``), exports the check gauges and has the buckets written to
the embedded store (``business_store``). State is two tiers of time buckets per series, both bounded by config:
fine buckets (``bucket_secs``) for the current window and coarse ones (``baseline_bucket_secs``) for baselines
that span days.
"""

from __future__ import annotations

import contextlib
import logging
import math
import threading
from collections.abc import Sequence

from prometheus_client import CollectorRegistry, Counter, Gauge

from sidecar.checks.business.columns import observe_blocks
from sidecar.checks.business.config import BusinessConfig
from sidecar.checks.business.eval import Result, evaluate_series, to_finding
from sidecar.checks.business.series import CheckState, Series, extract
from sidecar.checks.business.store import BucketStore
from sidecar.clock import Clock
from sidecar.component import Readiness, Role
from sidecar.model import Batch, Event, Finding
from sidecar.store import Store

__all__ = ["BusinessChecks"]


class BusinessChecks:
    """One component evaluating every configured business check (kind="business")."""

    name = "business"
    role = Role.CHECK

    def __init__(
        self,
        cfg: BusinessConfig,
        *,
        registry: CollectorRegistry,
        clock: Clock,
        store: Store,
        logger: logging.Logger | None = None,
    ) -> None:
        self.cfg = cfg
        self.clock = clock
        self.log = logger or logging.getLogger("sidecar.business")
        self._lock = threading.Lock()
        self.checks = {n: CheckState(n, c) for n, c in cfg.checks.items()}
        self._observed = Counter(
            "sidecar_business_events",
            "Event values taken into a business check's window.",
            ["check"],
            registry=registry,
        )
        self._dropped = Counter(
            "sidecar_business_events_dropped",
            "Events a business check could not use, by reason (missing_field, not_numeric, too_old, future, "
            "series_limit).",
            ["check", "reason"],
            registry=registry,
        )
        store_errors = Counter(
            "sidecar_business_store_errors",
            "Failures to persist or load business-check buckets.",
            registry=registry,
        )
        lbl = ["check", "model", "version"]
        self._value = Gauge("sidecar_business_value", "Current aggregate of a business check.", lbl, registry=registry)
        self._baseline = Gauge(
            "sidecar_business_baseline", "Baseline aggregate of a business check.", lbl, registry=registry
        )
        self._change = Gauge(
            "sidecar_business_change_ratio",
            "Relative change (value - baseline) / |baseline| of a business check.",
            lbl,
            registry=registry,
        )
        self._threshold = Gauge(
            "sidecar_business_threshold",
            "Threshold of a business check (a fraction when compare is relative).",
            ["check"],
            registry=registry,
        )
        self._condition = Gauge(
            "sidecar_business_condition",
            "1 while a business check's condition holds (before its hold duration).",
            [*lbl, "severity"],
            registry=registry,
        )
        self._insufficient = Gauge(
            "sidecar_business_insufficient_data",
            "1 while a business check has too little data to decide.",
            lbl,
            registry=registry,
        )
        for n, c in self.checks.items():
            self._threshold.labels(n).set(c.cfg.threshold)
        self.buckets = BucketStore(store, errors=store_errors, lock=self._lock, log=self.log)
        self.buckets.load(self.checks, self.clock.now())

    # -- lifecycle -------------------------------------------------------------------------------------------
    async def start(self) -> None:
        return None

    async def shutdown(self) -> None:
        self.buckets.persist(self.checks)

    def readiness(self) -> Readiness | None:
        return None

    def routes(self) -> None:
        return None

    # -- observe ---------------------------------------------------------------------------------------------
    def observe(self, batch: Batch) -> None:
        if batch.kind != "events":
            return
        now = self.clock.now()
        with self._lock:
            for chk in self.checks.values():
                self._count(chk, self._observe_many(chk, batch.items, now))

    def observe_columns(self, batch: Batch) -> None:
        """An ``event_columns`` batch, as arrays (``columns.py``): the same buckets and counts as ``observe``."""
        now = self.clock.now()
        with self._lock:
            for chk in self.checks.values():
                self._count(chk, observe_blocks(chk, batch.items, now, self.cfg.max_future_skew_secs))

    def _count(self, chk: CheckState, reasons: dict[str, int]) -> None:
        # Counted once per batch and reason: the same totals as one increment per event.
        if taken := reasons.pop("", 0):
            self._observed.labels(chk.name).inc(taken)
        for reason, n in reasons.items():
            self._dropped.labels(chk.name, reason).inc(n)

    def _observe_many(self, chk: CheckState, events: Sequence[Event], now: float) -> dict[str, int]:
        """Takes each event of the check's model into its series, in order; returns how many were taken ("")
        and how many were dropped, by reason."""
        cfg = chk.cfg
        model, head, key, den_ref = cfg.model, chk.head, chk.key, chk.den_ref
        latest, oldest = now + self.cfg.max_future_skew_secs, now - chk.horizon
        series, max_series = chk.series, cfg.max_series
        reasons: dict[str, int] = {}
        for ev in events:
            if model is not None and ev.model != model:
                continue
            reason = ""
            value = extract(ev, head, key)
            den: float | None = 0.0
            if den_ref is not None:
                den = extract(ev, *den_ref)
            if value is None or den is None:
                reason = "missing_field"
            elif not (math.isfinite(value) and math.isfinite(den)):
                reason = "not_numeric"
            elif ev.timestamp > latest:
                reason = "future"
            elif ev.timestamp < oldest:
                reason = "too_old"
            else:
                skey = chk.series_key(ev)
                s = series.get(skey)
                if s is None:
                    if len(series) >= max_series:
                        reason = "series_limit"
                    else:
                        s = series[skey] = Series(labels=skey)
                if s is not None:
                    chk.add(s, ev, value, den)
            reasons[reason] = reasons.get(reason, 0) + 1
        return reasons

    # -- evaluate --------------------------------------------------------------------------------------------
    def evaluate(self, now: float) -> Sequence[Finding]:
        out: list[Finding] = []
        with self._lock:
            for chk in self.checks.values():
                for key in list(chk.series):
                    r = evaluate_series(chk, chk.series[key], now)
                    if r is None:
                        self._unexport(chk, chk.series.pop(key))
                        continue
                    self._export(chk, chk.series[key], r)
                    out.append(to_finding(chk, r, now))
        # SQLite I/O happens outside the lock, so observe() on the event loop never waits for the disk.
        self.buckets.persist(self.checks)
        self.buckets.prune(self.checks, now)
        return out

    def _export(self, chk: CheckState, s: Series, r: Result) -> None:
        lbl = (chk.name, r.model, r.version)
        if s.exported is not None and s.exported != lbl:
            self._unexport(chk, s)
        s.exported = lbl
        nan = math.nan
        self._value.labels(*lbl).set(nan if r.value is None else r.value)
        self._baseline.labels(*lbl).set(nan if r.baseline is None else r.baseline)
        self._change.labels(*lbl).set(nan if r.change is None else r.change)
        self._condition.labels(*lbl, chk.cfg.severity).set(1.0 if r.active else 0.0)
        self._insufficient.labels(*lbl).set(1.0 if r.insufficient else 0.0)

    def _unexport(self, chk: CheckState, s: Series) -> None:
        if s.exported is None:
            return
        lbl = s.exported
        for g in (self._value, self._baseline, self._change, self._insufficient):
            with contextlib.suppress(KeyError):
                g.remove(*lbl)
        with contextlib.suppress(KeyError):
            self._condition.remove(*lbl, chk.cfg.severity)
        s.exported = None
