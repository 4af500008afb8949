"""Business-metric checks: an aggregate of an event field over a window, vs a baseline window or a threshold.

State is two tiers of time buckets per series, both bounded by config: fine buckets (``bucket_secs``) for the
current window and coarse ones (``baseline_bucket_secs``) for baselines that span days. A bucket keeps a
count, a sum, a denominator sum and, for quantile checks, a KLL sketch (mergeable, so a window is the merge
of its buckets). Every touched bucket is written to the embedded store at each evaluation, so a restart does
not blind a check whose baseline is a week long.

The baseline window ends where the current window starts, so a regression does not dilute its own baseline.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import logging
import math
import threading
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from datasketches import kll_floats_sketch
from prometheus_client import CollectorRegistry, Counter, Gauge

from sidecar.checks.business_config import BusinessCheckConfig, BusinessConfig, parse_field_ref
from sidecar.clock import Clock
from sidecar.component import Readiness
from sidecar.model import Batch, Event, Finding
from sidecar.naming import camel_alertname, human_secs
from sidecar.store import Store

__all__ = ["BusinessChecks"]

_KLL_K = 200
_TABLE = "business_buckets"


@dataclass
class _Bucket:
    count: int = 0
    total: float = 0.0
    den: float = 0.0
    sketch: Any = None
    dirty: bool = True

    def add(self, value: float, den: float, quantile: bool) -> None:
        self.count += 1
        self.total += value
        self.den += den
        if quantile:
            if self.sketch is None:
                self.sketch = kll_floats_sketch(_KLL_K)
            self.sketch.update(value)
        self.dirty = True


def _version_key(version: str) -> tuple[int, int, str]:
    """Orders Triton's numeric versions numerically, and any other version string after them, by text."""
    return (0, int(version), "") if version.isdigit() else (1, 0, version)


@dataclass
class _Series:
    labels: tuple[str, ...]
    version: str = ""
    trace_id: str | None = None
    cur: dict[float, _Bucket] = field(default_factory=dict)
    base: dict[float, _Bucket] = field(default_factory=dict)
    exported: tuple[str, str, str] | None = None


def _extract(ev: Event, head: str, key: str) -> float | None:
    raw: Any
    if head == "count":
        return 1.0
    if head == "score":
        raw = ev.score
    elif head == "label":
        raw = ev.label
    elif head == "fields":
        raw = ev.fields.get(key)
    else:
        raw = ev.features.get(key)
    if raw is None:
        return None
    if isinstance(raw, int | float):
        return float(raw)
    if isinstance(raw, str):
        try:
            return float(raw)
        except ValueError:
            return math.nan
    return math.nan


class _Check:
    def __init__(self, name: str, cfg: BusinessCheckConfig) -> None:
        self.name = name
        self.cfg = cfg
        self.head, self.key = parse_field_ref(cfg.field)
        self.den_ref = parse_field_ref(cfg.denominator) if cfg.denominator else None
        self.quantile = cfg.aggregate == "quantile"
        # Persisted buckets are only reused while the measured field stays the same.
        self.fp = hashlib.sha1(f"{cfg.field}|{cfg.denominator}|{cfg.aggregate}".encode()).hexdigest()[:12]
        self.series: dict[tuple[str, ...], _Series] = {}
        self.horizon = cfg.window_secs + (cfg.baseline_secs or 0.0)

    def series_key(self, ev: Event) -> tuple[str, ...]:
        return tuple(ev.model if g == "model" else ev.version for g in self.cfg.group_by)


class BusinessChecks:
    """One component evaluating every configured business check (kind="business")."""

    name = "business"
    role = "check"

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
        self.store = store
        self.log = logger or logging.getLogger("sidecar.business")
        self._lock = threading.Lock()
        self.checks = {n: _Check(n, c) for n, c in cfg.checks.items()}
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
        self._store_errors = Counter(
            "sidecar_business_store_errors",
            "Failures to persist or load business-check buckets.",
            registry=registry,
        )
        lbl = ["check", "model", "version"]
        self._value = Gauge(
            "sidecar_business_value", "Current aggregate of a business check.", lbl, registry=registry
        )
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
        self.store.execute(
            f"CREATE TABLE IF NOT EXISTS {_TABLE} (chk TEXT, fp TEXT, series TEXT, tier TEXT, start REAL, "
            "count INTEGER, total REAL, den REAL, sketch BLOB, version TEXT, "
            "PRIMARY KEY (chk, fp, series, tier, start))"
        )
        self._load()

    # -- lifecycle -------------------------------------------------------------------------------------------
    async def start(self) -> None:
        return None

    async def shutdown(self) -> None:
        self._persist()

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
                for ev in batch.items:
                    if isinstance(ev, Event):
                        self._observe_one(chk, ev, now)

    def _observe_one(self, chk: _Check, ev: Event, now: float) -> None:
        cfg = chk.cfg
        if cfg.model is not None and ev.model != cfg.model:
            return
        value = _extract(ev, chk.head, chk.key)
        if value is None:
            self._dropped.labels(chk.name, "missing_field").inc()
            return
        den = 0.0
        if chk.den_ref is not None:
            d = _extract(ev, *chk.den_ref)
            if d is None:
                self._dropped.labels(chk.name, "missing_field").inc()
                return
            den = d
        if math.isnan(value) or math.isnan(den) or math.isinf(value) or math.isinf(den):
            self._dropped.labels(chk.name, "not_numeric").inc()
            return
        ts = ev.timestamp
        if ts > now + self.cfg.max_future_skew_secs:
            self._dropped.labels(chk.name, "future").inc()
            return
        if ts < now - chk.horizon:
            self._dropped.labels(chk.name, "too_old").inc()
            return
        key = chk.series_key(ev)
        s = chk.series.get(key)
        if s is None:
            if len(chk.series) >= cfg.max_series:
                self._dropped.labels(chk.name, "series_limit").inc()
                return
            s = chk.series[key] = _Series(labels=key)
        # Grouped by model only, the series is labelled with the newest version seen: traffic split across
        # versions must not flip the label (and so the alert's identity) from one event to the next.
        if not s.version or _version_key(ev.version) >= _version_key(s.version):
            s.version = ev.version
        if ev.trace_id:
            s.trace_id = ev.trace_id
        b_cur = ts - ts % cfg.bucket_secs
        s.cur.setdefault(b_cur, _Bucket()).add(value, den, chk.quantile)
        if cfg.baseline_secs is not None:
            b_base = ts - ts % cfg.baseline_bucket_secs
            s.base.setdefault(b_base, _Bucket()).add(value, den, chk.quantile)
        self._observed.labels(chk.name).inc()

    # -- evaluate --------------------------------------------------------------------------------------------
    def evaluate(self, now: float) -> Sequence[Finding]:
        out: list[Finding] = []
        with self._lock:
            for chk in self.checks.values():
                for key in list(chk.series):
                    f = self._evaluate_series(chk, chk.series[key], now)
                    if f is None:
                        self._unexport(chk, chk.series.pop(key))
                    else:
                        out.append(f)
        # SQLite I/O happens outside the lock, so observe() on the event loop never waits for the disk.
        self._persist()
        self._prune_store(now)
        return out

    def _aggregate(self, chk: _Check, buckets: list[_Bucket], span: float) -> tuple[float | None, int]:
        n = sum(b.count for b in buckets)
        if n == 0:
            return None, 0
        agg = chk.cfg.aggregate
        if agg == "mean":
            return sum(b.total for b in buckets) / n, n
        if agg == "rate":
            return sum(b.total for b in buckets) / span, n
        if agg == "ratio":
            den = sum(b.den for b in buckets)
            return (sum(b.total for b in buckets) / den if den else None), n
        merged = kll_floats_sketch(_KLL_K)
        for b in buckets:
            if b.sketch is not None:
                merged.merge(b.sketch)
        return float(merged.get_quantile(chk.cfg.quantile or 0.5)), n

    def _evaluate_series(self, chk: _Check, s: _Series, now: float) -> Finding | None:
        cfg = chk.cfg
        lo = now - cfg.window_secs
        # A bucket belongs to the window when it starts inside it, so a rate divides by about window_secs.
        for start in [b for b in s.cur if b <= lo]:
            del s.cur[start]
        cur = [b for start, b in s.cur.items() if start <= now]
        if cfg.baseline_secs is not None:
            blo = lo - cfg.baseline_secs
            for start in [b for b in s.base if b < blo]:
                del s.base[start]
        if not s.cur and not s.base:
            return None
        value, n = self._aggregate(chk, cur, cfg.window_secs)
        baseline: float | None = None
        change: float | None = None
        insufficient = n < cfg.min_events or value is None
        reason = f"{n} events in the window (need {cfg.min_events})" if insufficient else ""
        if cfg.compare == "relative":
            # Only buckets wholly before the current window, so the regression is not in its own baseline.
            base = [b for start, b in s.base.items() if start + cfg.baseline_bucket_secs <= lo]
            baseline, bn = self._aggregate(chk, base, cfg.baseline_secs or 1.0)
            coverage = len(base) * cfg.baseline_bucket_secs / (cfg.baseline_secs or 1.0)
            if not insufficient and (
                bn < cfg.min_baseline_events or baseline is None or coverage < cfg.min_baseline_coverage
            ):
                insufficient = True
                reason = (
                    f"baseline has {bn} events over {min(coverage, 1.0):.0%} of its window "
                    f"(need {cfg.min_baseline_events} over {cfg.min_baseline_coverage:.0%})"
                )
            if value is not None and baseline:
                change = (value - baseline) / abs(baseline)
        measured = change if cfg.compare == "relative" else value
        active = False
        if not insufficient and measured is not None:
            limit = (
                cfg.threshold
                if cfg.compare == "absolute"
                else (cfg.threshold if cfg.direction == "up" else -cfg.threshold)
            )
            active = measured > limit if cfg.direction == "up" else measured < limit
        model = s.labels[cfg.group_by.index("model")] if "model" in cfg.group_by else (cfg.model or "")
        version = s.labels[cfg.group_by.index("version")] if "version" in cfg.group_by else s.version
        self._export(chk, s, model, version, value, baseline, change, active, insufficient)
        labels = {"alertname": camel_alertname(chk.name), "model": model, "version": version}
        if cfg.team:
            labels["team"] = cfg.team
        ann = {
            "display_name": cfg.display_name or chk.name.replace("_", " "),
            "aggregate": cfg.aggregate
            if cfg.aggregate != "quantile"
            else f"p{round((cfg.quantile or 0) * 100)}",
            "compare": cfg.compare,
            "direction": cfg.direction,
            "events": str(n),
            "runbook": cfg.runbook,
            "baseline_window": human_secs(cfg.baseline_secs),
        }
        if change is not None:
            ann["change_pct"] = f"{change * 100:.1f}"
        if reason:
            ann["insufficient_reason"] = reason
        return Finding(
            check=chk.name,
            kind="business",
            labels=labels,
            active=active,
            value=value,
            threshold=cfg.threshold,
            baseline=baseline,
            effect_size=change,
            window_secs=cfg.window_secs,
            severity=cfg.severity,
            evaluated_at=now,
            insufficient_data=insufficient,
            for_secs=cfg.for_secs,
            trace_id=s.trace_id,
            annotations=ann,
            description=reason,
        )

    def _export(
        self,
        chk: _Check,
        s: _Series,
        model: str,
        version: str,
        value: float | None,
        baseline: float | None,
        change: float | None,
        active: bool,
        insufficient: bool,
    ) -> None:
        lbl = (chk.name, model, version)
        if s.exported is not None and s.exported != lbl:
            self._unexport(chk, s)
        s.exported = lbl
        nan = math.nan
        self._value.labels(*lbl).set(nan if value is None else value)
        self._baseline.labels(*lbl).set(nan if baseline is None else baseline)
        self._change.labels(*lbl).set(nan if change is None else change)
        self._condition.labels(*lbl, chk.cfg.severity).set(1.0 if active else 0.0)
        self._insufficient.labels(*lbl).set(1.0 if insufficient else 0.0)

    def _unexport(self, chk: _Check, s: _Series) -> None:
        if s.exported is None:
            return
        lbl = s.exported
        for g in (self._value, self._baseline, self._change, self._insufficient):
            with contextlib.suppress(KeyError):
                g.remove(*lbl)
        with contextlib.suppress(KeyError):
            self._condition.remove(*lbl, chk.cfg.severity)
        s.exported = None

    # -- persistence -----------------------------------------------------------------------------------------
    def _persist(self) -> None:
        with self._lock:
            rows, touched = self._dirty_rows()
        if not rows:
            return
        try:
            self.store.executemany(
                f"INSERT OR REPLACE INTO {_TABLE} (chk, fp, series, tier, start, count, total, den, sketch, "
                "version) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                rows,
            )
        except Exception:
            self._store_errors.inc()
            self.log.exception("could not persist business-check buckets")
            with self._lock:
                for b in touched:
                    b.dirty = True  # written next round
            return

    def _dirty_rows(self) -> tuple[list[tuple[Any, ...]], list[_Bucket]]:
        """Rows for every bucket changed since the last write, marked clean (call with the lock held)."""
        rows: list[tuple[Any, ...]] = []
        touched: list[_Bucket] = []
        for chk in self.checks.values():
            for s in chk.series.values():
                skey = json.dumps(list(s.labels))
                for tier, buckets in (("cur", s.cur), ("base", s.base)):
                    for start, b in buckets.items():
                        if b.dirty:
                            blob = b.sketch.serialize() if b.sketch is not None else None
                            rows.append(
                                (
                                    chk.name,
                                    chk.fp,
                                    skey,
                                    tier,
                                    start,
                                    b.count,
                                    b.total,
                                    b.den,
                                    blob,
                                    s.version,
                                )
                            )
                            touched.append(b)
                            b.dirty = False
        return rows, touched

    def _prune_store(self, now: float) -> None:
        for chk in self.checks.values():
            try:
                self.store.execute(
                    f"DELETE FROM {_TABLE} WHERE chk = ? AND (fp != ? OR start < ?)",
                    (chk.name, chk.fp, now - chk.horizon - chk.cfg.baseline_bucket_secs),
                )
            except Exception:
                self._store_errors.inc()
        if self.checks:
            marks = ",".join("?" * len(self.checks))
            try:
                self.store.execute(f"DELETE FROM {_TABLE} WHERE chk NOT IN ({marks})", tuple(self.checks))
            except Exception:
                self._store_errors.inc()

    def _load(self) -> None:
        now = self.clock.now()
        for chk in self.checks.values():
            try:
                rows = self.store.query(
                    f"SELECT series, tier, start, count, total, den, sketch, version FROM {_TABLE} "
                    "WHERE chk = ? AND fp = ? AND start >= ? ORDER BY start",
                    (chk.name, chk.fp, now - chk.horizon - chk.cfg.baseline_bucket_secs),
                )
            except Exception:
                self._store_errors.inc()
                self.log.exception("could not load business-check buckets for %s", chk.name)
                continue
            for skey, tier, start, count, total, den, blob, version in rows:
                key = tuple(json.loads(skey))
                s = chk.series.get(key)
                if s is None:
                    if len(chk.series) >= chk.cfg.max_series:
                        continue
                    s = chk.series[key] = _Series(labels=key)
                s.version = version or s.version
                sketch = kll_floats_sketch.deserialize(blob) if blob is not None else None
                b = _Bucket(count=count, total=total, den=den, sketch=sketch, dirty=False)
                (s.cur if tier == "cur" else s.base)[start] = b
