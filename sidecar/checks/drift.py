"""The drift check: per model, version and feature, is the current window still like the reference?

Decision (per evaluation, per model/version): numeric features get a two-sample KS test, categorical ones a
chi-square test (unseen categories pooled and reported) with PSI as the effect size; the p-values of all the
model/version's features are Benjamini-Hochberg adjusted together; a feature's *condition* holds when the
adjusted p is below ``p_threshold`` AND the effect (KS D or PSI) is at least its floor. The sustained rule is
decided here, in the check: a finding is ``active`` only once the condition has held for ``sustained_secs``
(the since-time is persisted, so a restart does not restart the clock). A rise of the missing/NaN ratio is its
own finding (``test="missing"``): missing values never enter a statistic.

``observe`` runs on the event loop (the bus) and only appends into bounded windows; ``evaluate`` runs in the
service's worker thread. One lock guards the windows; statistics are computed outside it on snapshots.
"""

from __future__ import annotations

import math
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any, TypeVar

import orjson
from fastapi import APIRouter, HTTPException, Request
from prometheus_client import Counter, Gauge
from pydantic import ValidationError

from sidecar.checks.drift_config import DriftConfig, ReferenceConfig
from sidecar.checks.references import Reference, load_reference_file
from sidecar.checks.stats import KsResult, benjamini_hochberg, chi_square, ks_2samp_fast, psi_numeric
from sidecar.checks.windows import FeatureKind, FeatureWindow, WindowSnapshot, pack, unpack
from sidecar.component import Context, Readiness
from sidecar.errors import ConfigError
from sidecar.model import Batch, Change, Event, Finding

__all__ = ["DriftCheck", "FeatureResult"]

_SEP = "\x1f"
_PIN_BUCKET_SECS = 1e18  # one bucket for a pinned collector: it is bounded by event count, not time
SCORE, CLASS = "_score", "_class"
SeriesKey = tuple[str, str, str]
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


class _Pinned:
    def __init__(self, target: int) -> None:
        self.target = target
        self.events = 0
        self.windows: dict[str, FeatureWindow] = {}


def _key(*parts: str) -> str:
    return _SEP.join(parts)


class DriftCheck:
    name = "drift"
    role = "check"

    def __init__(self, ctx: Context, cfg: DriftConfig) -> None:
        self.ctx = ctx
        self.cfg = cfg
        self._log = ctx.logger.getChild("drift")
        self._lock = threading.RLock()
        self._kinds: dict[tuple[str, str], FeatureKind] = {}
        self._windows: dict[SeriesKey, FeatureWindow] = {}
        self._history: dict[SeriesKey, FeatureWindow] = {}
        self._refs: dict[SeriesKey, Reference] = {}
        self._pinned: dict[tuple[str, str], _Pinned] = {}
        self._overrides: dict[str, ReferenceConfig] = {}
        self._since: dict[tuple[str, str, str, str], float] = {}
        self._models: set[tuple[str, str]] = set()
        self._spec_saved: set[str] = set()
        self._dirty: set[SeriesKey] = set()
        self._last_persist = -math.inf
        self._started = False
        self._stopped = False
        r = ctx.registry
        lab = ["model", "version", "feature", "test"]
        self.g_stat = Gauge("sidecar_drift_statistic", "Drift test statistic (KS D or chi-square).", lab,
                            registry=r)
        self.g_p = Gauge("sidecar_drift_p_value", "Benjamini-Hochberg-adjusted p-value of the drift test.",
                         lab, registry=r)
        self.g_p_raw = Gauge("sidecar_drift_p_value_raw", "Unadjusted p-value of the drift test.", lab,
                             registry=r)
        self.g_effect = Gauge("sidecar_drift_effect_size", "Effect size (KS D for numeric, PSI for "
                                                           "categorical).", lab, registry=r)
        self.g_psi = Gauge("sidecar_drift_psi", "Population stability index (companion number).",
                           ["model", "version", "feature"], registry=r)
        self.g_samples = Gauge("sidecar_drift_samples", "Non-missing values in the window.",
                               ["model", "version", "feature", "window"], registry=r)
        self.g_missing = Gauge("sidecar_drift_missing_ratio", "Share of missing/NaN values in the window.",
                               ["model", "version", "feature", "window"], registry=r)
        self.g_unseen = Gauge("sidecar_drift_unseen_ratio", "Share of current values in categories the "
                                                            "reference never saw.",
                              ["model", "version", "feature"], registry=r)
        self.g_drifting = Gauge("sidecar_drift_drifting", "1 when the drift condition has held for "
                                                          "sustained_secs.", lab, registry=r)
        self.g_condition = Gauge("sidecar_drift_condition", "1 when p < threshold and effect >= floor now.",
                                 lab, registry=r)
        self.g_eval = Gauge("sidecar_drift_last_evaluation_duration_seconds",
                            "Wall time the last drift evaluation took.", registry=r)
        self.g_memory = Gauge("sidecar_drift_window_memory_bytes", "Approximate bytes held by drift windows.",
                              registry=r)
        self.c_observed = Counter("sidecar_drift_events_observed", "Events the drift check took in.",
                                  registry=r)
        self.c_dropped = Counter("sidecar_drift_values_dropped", "Values or events the drift check could not "
                                                                 "use, by reason.", ["reason"], registry=r)
        self.c_store_errors = Counter("sidecar_drift_store_errors", "Failures reading or writing drift "
                                                                    "state.", ["op"], registry=r)
        self.c_ref_changes = Counter("sidecar_drift_reference_changes", "Reference changes (API or config).",
                                     registry=r)
        self._load_state()
        self._load_file_references()

    # ---- lifecycle -------------------------------------------------------------------------------
    async def start(self) -> None:
        if not self._started:
            self._started = True
            self.ctx.bus.subscribe("events", self.name, self.observe)

    async def shutdown(self) -> None:
        if self._stopped:
            return
        self._stopped = True
        self.persist(force=True)

    def readiness(self) -> Readiness | None:
        return None

    # ---- config helpers --------------------------------------------------------------------------
    def spec_for(self, model: str) -> ReferenceConfig:
        if model in self._overrides:
            return self._overrides[model]
        m = self.cfg.models.get(model)
        return m.reference if m is not None and m.reference is not None else self.cfg.reference

    def _kind(self, model: str, feature: str, value: object) -> FeatureKind | None:
        k = self._kinds.get((model, feature))
        if k is not None:
            return k
        m = self.cfg.models.get(model)
        declared = m.features.get(feature) if m is not None else None
        if declared is None:
            if feature == SCORE:
                declared = "numeric"
            elif feature == CLASS:
                declared = "categorical"
            elif not self.cfg.infer_features:
                return None
            elif isinstance(value, bool | int | float) and not (
                    isinstance(value, float) and math.isnan(value)):
                declared = "numeric"
            elif isinstance(value, str):
                declared = "categorical"
            else:
                return None  # a missing first value tells nothing about the kind; decide on the next one
        return declared

    def _remember_kind(self, model: str, feature: str, kind: FeatureKind) -> None:
        """Fixes a feature's kind once it has a series (so the kinds map is bounded like the series are)."""
        if (model, feature) in self._kinds:
            return
        self._kinds[(model, feature)] = kind
        try:
            self.ctx.store.put("drift.kinds", _key(model, feature), kind)
        except Exception:
            self.c_store_errors.labels("write").inc()

    def _new_window(self, kind: FeatureKind) -> FeatureWindow:
        c = self.cfg
        return FeatureWindow(kind, bucket_secs=c.window_secs / c.bucket_count, n_buckets=c.bucket_count,
                             exact_cap=max(1, c.max_exact_samples // c.bucket_count), kll_k=c.kll_k,
                             max_categories=c.max_categories)

    def _new_history(self, kind: FeatureKind, spec: ReferenceConfig) -> FeatureWindow:
        c = self.cfg
        hours = math.ceil((spec.rolling_offset_secs + c.window_secs) / 3600.0) + 1
        # Hourly buckets held as sketches only (exact_cap small): a week of history must stay bounded.
        return FeatureWindow(kind, bucket_secs=3600.0, n_buckets=hours, exact_cap=256, kll_k=c.kll_k,
                             max_categories=c.max_categories)

    def _new_pin_window(self, kind: FeatureKind) -> FeatureWindow:
        c = self.cfg
        return FeatureWindow(kind, bucket_secs=_PIN_BUCKET_SECS, n_buckets=1,
                             exact_cap=c.max_reference_samples + 1, kll_k=c.kll_k,
                             max_categories=c.max_categories)

    # ---- observe (event loop) --------------------------------------------------------------------
    def observe(self, batch: Batch) -> None:
        if batch.kind != "events":
            return
        now = self.ctx.clock.now()
        with self._lock:
            for item in batch.items:
                if isinstance(item, Event):
                    self._observe_one(item, now)

    def _observe_one(self, e: Event, now: float) -> None:
        mv = (e.model, e.version)
        if mv not in self._models:
            if len(self._models) >= self.cfg.max_models:
                self.c_dropped.labels("model_limit").inc()
                return
            self._models.add(mv)
            if e.model not in self._spec_saved:
                self._spec_saved.add(e.model)
                self._save("drift.spec", e.model, self.spec_for(e.model).model_dump_json().encode())
        self.c_observed.inc()
        ts = min(e.timestamp, now)
        values: dict[str, object] = dict(e.features)
        if self.cfg.monitor_score:
            if e.score is not None or (e.model, SCORE) in self._kinds:
                values[SCORE] = e.score
            if e.prediction_class is not None or (e.model, CLASS) in self._kinds:
                values[CLASS] = e.prediction_class
        spec = self.spec_for(e.model)
        pin: _Pinned | None = None
        if spec.mode == "pinned":
            pin_ver = spec.pinned_version or e.version
            if pin_ver == e.version and (e.model, pin_ver, "") not in self._refs:
                pin = self._pinned.get((e.model, pin_ver))
                if pin is None:
                    pin = self._pinned[(e.model, pin_ver)] = _Pinned(spec.pinned_events)
                pin.events += 1
        late = False
        for feature, value in values.items():
            kind = self._kind(e.model, feature, value)
            if kind is None:
                continue
            key = (e.model, e.version, feature)
            win = self._windows.get(key)
            if win is None:
                if len(self._windows) >= self.cfg.max_series:
                    self.c_dropped.labels("series_limit").inc()
                    continue
                win = self._windows[key] = self._new_window(kind)
            self._remember_kind(e.model, feature, kind)
            if win.accepts(ts, now):
                self._add(win, kind, ts, value, counted=True)
                self._dirty.add(key)
            else:
                late = True
            if pin is not None:
                pw = pin.windows.get(feature)
                if pw is None:
                    pw = pin.windows[feature] = self._new_pin_window(kind)
                self._add(pw, kind, 0.0, value)
            if spec.mode == "rolling":
                hist = self._history.get(key)
                if hist is None:
                    hist = self._history[key] = self._new_history(kind, spec)
                if hist.accepts(ts, now):
                    self._add(hist, kind, ts, value)
        if late:
            self.c_dropped.labels("late").inc()
        if pin is not None and pin.events >= pin.target:
            self._freeze_pin(e.model, spec.pinned_version or e.version, pin, now)

    def _add(self, win: FeatureWindow, kind: FeatureKind, ts: float, value: object,
             counted: bool = False) -> None:
        """Adds one value; only the current window's add counts drops, so one value is counted once."""
        if value is None:
            win.add_missing(ts)
        elif kind == "numeric":
            if isinstance(value, bool | int | float):
                win.add_number(ts, float(value))
            else:
                if counted:
                    self.c_dropped.labels("type_mismatch").inc()
                win.add_missing(ts)
        elif isinstance(value, str):
            if not win.add_category(ts, value) and counted:
                self.c_dropped.labels("category_limit").inc()
        elif isinstance(value, float) and math.isnan(value):
            win.add_missing(ts)
        elif isinstance(value, bool | int | float):
            win.add_category(ts, str(value))
        else:
            if counted:
                self.c_dropped.labels("type_mismatch").inc()
            win.add_missing(ts)

    def _freeze_pin(self, model: str, version: str, pin: _Pinned, now: float) -> None:
        for feature, w in pin.windows.items():
            ref = Reference.from_snapshot(w.snapshot(), f"pinned:{version}", now)
            self._refs[(model, version, feature)] = ref
            self._save("drift.ref", _key(model, version, feature), ref.to_bytes())
        # A marker so later events of this version skip the collector even for features seen only later.
        self._refs[(model, version, "")] = Reference("numeric", 0, 0, f"pinned:{version}", now)
        self._save("drift.ref", _key(model, version, ""), self._refs[(model, version, "")].to_bytes())
        self._pinned.pop((model, version), None)
        self._delete("drift.pinned", _key(model, version))
        self._log.info("drift reference for %s pinned to version %s's first %d events", model, version,
                       pin.events)

    # ---- references ------------------------------------------------------------------------------
    def _load_file_references(self, only_model: str | None = None) -> None:
        models = [only_model] if only_model else sorted(set(self.cfg.models) | set(self._overrides))
        for model in models:
            spec = self.spec_for(model)
            if spec.mode != "file" or not spec.path:
                continue
            mcfg = self.cfg.models.get(model)
            declared: dict[str, FeatureKind] = dict(mcfg.features) if mcfg is not None else {}
            try:
                refs = load_reference_file(spec.path, created_at=self.ctx.clock.now(),
                                           max_rows=self.cfg.max_reference_samples, kinds=declared)
            except (OSError, ValueError) as exc:
                raise ConfigError(f"checks.drift.models.{model}.reference.path", str(exc)) from None
            with self._lock:
                for feature, ref in refs.items():
                    self._refs[(model, "*", feature)] = ref
                    self._kinds.setdefault((model, feature), ref.kind)

    def reference_for(self, model: str, version: str, feature: str, now: float) -> Reference | str:
        """The reference, or a reason why there is none yet (caller holds the lock)."""
        spec = self.spec_for(model)
        if spec.mode == "file":
            return self._refs.get((model, "*", feature)) or f"feature not in reference file {spec.path}"
        if spec.mode == "pinned":
            ver = spec.pinned_version or version
            ref = self._refs.get((model, ver, feature))
            if ref is not None:
                return ref
            pin = self._pinned.get((model, ver))
            if pin is not None:
                return f"reference collecting {pin.events}/{pin.target} events of version {ver}"
            if (model, ver, "") in self._refs:
                return f"feature absent from version {ver}'s pinned reference"
            return f"waiting for version {ver}'s first events"
        hist = self._history.get((model, version, feature))
        if hist is None:
            return "no history yet for the rolling reference"
        end = now - spec.rolling_offset_secs
        snap = hist.snapshot(end - self.cfg.window_secs, end)
        if snap.total == 0:
            return "no traffic in the same hours last week yet"
        return Reference.from_snapshot(snap, "rolling", now)

    def set_reference(self, model: str, spec: ReferenceConfig, *, who: str = "", source: str = "api") -> None:
        """Change a model's reference (an explicit action): old references are dropped, the change logged."""
        now = self.ctx.clock.now()
        with self._lock:
            self._overrides[model] = spec
            self._save("drift.override", model, spec.model_dump_json().encode())
            self._reset_model(model)
        if spec.mode == "file":
            self._load_file_references(model)
        self.c_ref_changes.inc()
        what = f"drift reference of {model} set to {spec.mode}" + (
            f" ({spec.path})" if spec.mode == "file" else
            f" (first {spec.pinned_events} events of {spec.pinned_version or 'each version'})"
            if spec.mode == "pinned" else "")
        self._record_change(Change(what=what, at=now, who=who, model=model, source=source))

    def _reset_model(self, model: str) -> None:
        for key in [k for k in self._refs if k[0] == model]:
            del self._refs[key]
            self._delete("drift.ref", _key(*key))
        for pk in [k for k in self._pinned if k[0] == model]:
            del self._pinned[pk]
            self._delete("drift.pinned", _key(*pk))
        for sk in [k for k in self._since if k[0] == model]:
            del self._since[sk]
            self._delete("drift.since", _key(*sk))

    def _record_change(self, change: Change) -> None:
        self._log.info("change: %s", change.what)
        if self.ctx.bus.publish(Batch(kind="changes", source=self.name, items=(change,),
                                      received_at=self.ctx.clock.now())):
            self._log.error("the change log refused a drift reference change (counted on the bus)")

    # ---- evaluate (worker thread) ----------------------------------------------------------------
    def evaluate(self, now: float) -> list[Finding]:
        t0 = time.perf_counter()
        work: list[tuple[SeriesKey, WindowSnapshot, Reference | str]] = []
        with self._lock:
            for key, win in self._windows.items():
                win.evict(now)
                work.append((key, win.snapshot(), self.reference_for(*key, now)))
            for hist in self._history.values():
                hist.evict(now)
            self.g_memory.set(sum(w.memory_bytes() for w in self._windows.values())
                              + sum(w.memory_bytes() for w in self._history.values()))
        numeric = {i: (ref, snap) for i, (_, snap, ref) in enumerate(work)
                   if not isinstance(ref, str) and self._ks_ready(snap, ref)}
        ks_done = dict(zip(numeric, self._map(_ks_job, list(numeric.values())), strict=True))
        by_model: dict[tuple[str, str], list[FeatureResult]] = {}
        for i, ((model, version, feature), snap, ref) in enumerate(work):
            by_model.setdefault((model, version), []).extend(self._test(feature, snap, ref, ks_done.get(i)))
        findings: list[Finding] = []
        for (model, version), results in sorted(by_model.items()):
            findings.extend(self._decide(model, version, results, now))
        if now - self._last_persist >= self.cfg.persist_interval_secs:
            self.persist()
            self._last_persist = now
        self.g_eval.set(time.perf_counter() - t0)
        return findings

    def _ks_ready(self, cur: WindowSnapshot, ref: Reference) -> bool:
        return (cur.kind == "numeric" and ref.ecdf is not None
                and cur.n >= self.cfg.min_samples and ref.n >= self.cfg.min_samples)

    def _map(self, fn: Callable[[tuple[Reference, WindowSnapshot]], _T],
             jobs: list[tuple[Reference, WindowSnapshot]]) -> list[_T]:
        """Runs the per-feature tests in ``eval_threads`` threads (numpy's sort and search release the GIL)."""
        threads = min(self.cfg.eval_threads, len(jobs))
        if threads <= 1:
            return [fn(j) for j in jobs]
        with ThreadPoolExecutor(max_workers=threads, thread_name_prefix="drift-eval") as pool:
            return list(pool.map(fn, jobs))

    def _test(self, feature: str, cur: WindowSnapshot, ref: Reference | str,
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
            self.c_dropped.labels("kind_mismatch").inc()
        return out

    def _decide(self, model: str, version: str, results: list[FeatureResult], now: float) -> list[Finding]:
        tested = [i for i, r in enumerate(results) if r.test in ("ks", "chi2") and not math.isnan(r.p)]
        qs = benjamini_hochberg([results[i].p for i in tested])
        q_by = dict(zip(tested, qs, strict=True))
        out: list[Finding] = []
        for i, r in enumerate(results):
            labels = {"model": model, "version": version, "feature": r.feature, "test": r.test}
            skey = (model, version, r.feature, r.test)
            q = q_by.get(i, math.nan)
            if r.test == "missing":
                condition = r.effect >= self.cfg.missing_ratio_increase
                floor = self.cfg.missing_ratio_increase
            else:
                floor = self.cfg.ks_effect_floor if r.test == "ks" else self.cfg.psi_effect_floor
                condition = (not r.insufficient and q < self.cfg.p_threshold and r.effect >= floor)
            with self._lock:
                if condition:
                    since = self._since.setdefault(skey, now)
                    if since == now:
                        self._save("drift.since", _key(*skey), repr(now).encode())
                elif skey in self._since:
                    del self._since[skey]
                    self._delete("drift.since", _key(*skey))
                since_v = self._since.get(skey)
            active = condition and since_v is not None and now - since_v >= self.cfg.sustained_secs
            self._export(model, version, r, q, condition, active)
            held = f"; condition held {now - since_v:.0f}s of {self.cfg.sustained_secs:.0f}s" \
                if since_v is not None else ""
            if r.insufficient:
                summary = f"drift {model} v{version} {r.feature}: insufficient data ({r.insufficient})"
            elif r.test == "missing":
                summary = f"missing values {model} v{version} {r.feature}: {r.detail}{held}"
            else:
                summary = (f"drift {model} v{version} {r.feature}: {r.detail}, p(BH)={q:.3g}, "
                           f"n={r.n_cur} vs {r.n_ref}{held}")
            out.append(Finding(
                check=self.name, kind="drift", labels=labels, active=active,
                value=None if math.isnan(r.statistic) else r.statistic, threshold=self.cfg.p_threshold,
                p_value=None if math.isnan(q) else q, effect_size=None if math.isnan(r.effect) else r.effect,
                window_secs=self.cfg.window_secs, summary=summary, evaluated_at=now,
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

    def _export(self, model: str, version: str, r: FeatureResult, q: float, condition: bool,
                active: bool) -> None:
        lab = (model, version, r.feature, r.test)
        self.g_drifting.labels(*lab).set(1.0 if active else 0.0)
        self.g_condition.labels(*lab).set(1.0 if condition else 0.0)
        self.g_missing.labels(model, version, r.feature, "current").set(r.missing_ratio)
        self.g_missing.labels(model, version, r.feature, "reference").set(r.ref_missing_ratio)
        if r.test == "missing":
            return
        self.g_samples.labels(model, version, r.feature, "current").set(r.n_cur)
        self.g_samples.labels(model, version, r.feature, "reference").set(r.n_ref)
        self.g_stat.labels(*lab).set(r.statistic)
        self.g_p.labels(*lab).set(q)
        self.g_p_raw.labels(*lab).set(r.p)
        self.g_effect.labels(*lab).set(r.effect)
        self.g_psi.labels(model, version, r.feature).set(r.psi)
        if r.test == "chi2":
            self.g_unseen.labels(model, version, r.feature).set(r.unseen_ratio)

    # ---- persistence -----------------------------------------------------------------------------
    def _save(self, ns: str, key: str, value: bytes) -> None:
        try:
            self.ctx.store.put(ns, key, value)
        except Exception:
            self.c_store_errors.labels("write").inc()
            self._log.exception("could not save drift state %s/%s", ns, key)

    def _delete(self, ns: str, key: str) -> None:
        try:
            self.ctx.store.delete(ns, key)
        except Exception:
            self.c_store_errors.labels("write").inc()

    def persist(self, force: bool = False) -> None:
        """Save changed windows, collectors and histories (references are saved when they freeze)."""
        with self._lock:
            keys = list(self._windows) if force else list(self._dirty)
            self._dirty.clear()
            rows: list[tuple[str, str, bytes]] = []
            for key in keys:
                win = self._windows.get(key)
                if win is not None:
                    rows.append(("drift.window", _key(*key), win.to_bytes()))
            for hk, hist in self._history.items():
                rows.append(("drift.history", _key(*hk), hist.to_bytes()))
            for (model, ver), pin in self._pinned.items():
                feats = sorted(pin.windows)
                rows.append(("drift.pinned", _key(model, ver),
                             pack({"events": pin.events, "target": pin.target, "features": feats},
                                  [pin.windows[f].to_bytes() for f in feats])))
        try:
            self.ctx.store.executemany("INSERT OR REPLACE INTO kv (ns, k, v) VALUES (?, ?, ?)", rows)
        except Exception:
            self.c_store_errors.labels("write").inc()
            self._log.exception("could not persist drift windows")

    def _load_state(self) -> None:
        st = self.ctx.store
        try:
            for ns, k, v in st.query("SELECT ns, k, v FROM kv WHERE ns LIKE 'drift.%'"):
                self._load_row(ns, k, v)
        except Exception:
            self.c_store_errors.labels("read").inc()
            self._log.exception("could not load drift state; starting empty")
        self._check_config_changes()

    def _load_row(self, ns: str, k: str, v: Any) -> None:
        parts = tuple(k.split(_SEP))
        try:
            if ns == "drift.kinds" and len(parts) == 2:
                kind = v.decode() if isinstance(v, bytes) else str(v)
                if kind in ("numeric", "categorical"):
                    self._kinds[(parts[0], parts[1])] = kind  # type: ignore[assignment]
            elif ns == "drift.window" and len(parts) == 3:
                self._windows[(parts[0], parts[1], parts[2])] = FeatureWindow.from_bytes(v)
                self._models.add((parts[0], parts[1]))
            elif ns == "drift.history" and len(parts) == 3:
                self._history[(parts[0], parts[1], parts[2])] = FeatureWindow.from_bytes(v)
            elif ns == "drift.ref" and len(parts) == 3:
                self._refs[(parts[0], parts[1], parts[2])] = Reference.from_bytes(v)
            elif ns == "drift.pinned" and len(parts) == 2:
                h, blobs = unpack(v)
                pin = _Pinned(int(h["target"]))
                pin.events = int(h["events"])
                for f, b in zip(h["features"], blobs, strict=True):
                    pin.windows[f] = FeatureWindow.from_bytes(b)
                self._pinned[(parts[0], parts[1])] = pin
            elif ns == "drift.since" and len(parts) == 4:
                self._since[(parts[0], parts[1], parts[2], parts[3])] = float(v)
            elif ns == "drift.override":
                self._overrides[k] = ReferenceConfig.model_validate_json(v)
        except (ValueError, KeyError, TypeError, ValidationError, RuntimeError):
            self.c_store_errors.labels("decode").inc()
            self._log.warning("dropping unreadable drift state %s/%s", ns, k)

    def _check_config_changes(self) -> None:
        """A reference spec that differs from the one the stored state was built with is a change."""
        models = sorted({k[0] for k in self._refs} | set(self.cfg.models) | {k[0] for k in self._pinned}
                        | {k[0] for k in self._models})
        for model in models:
            spec = self.spec_for(model).model_dump_json()
            try:
                old = self.ctx.store.get("drift.spec", model)
            except Exception:
                old = None
            old_s = old.decode() if isinstance(old, bytes) else old
            if old_s is not None and old_s != spec:
                self._reset_model(model)
                self.c_ref_changes.inc()
                self._record_change(Change(what=f"drift reference of {model} changed in config",
                                           at=self.ctx.clock.now(), model=model, source="config"))
            if old_s != spec:
                self._save("drift.spec", model, spec.encode())
            self._spec_saved.add(model)

    # ---- admin API -------------------------------------------------------------------------------
    def describe_references(self) -> list[dict[str, object]]:
        with self._lock:
            out: list[dict[str, object]] = []
            for (model, ver, feature), ref in sorted(self._refs.items()):
                if feature:
                    out.append({"model": model, "version": ver, "feature": feature, "kind": ref.kind,
                                "source": ref.source, "n": ref.n, "missing": ref.missing,
                                "created_at": ref.created_at})
            for (model, ver), pin in sorted(self._pinned.items()):
                out.append({"model": model, "version": ver, "collecting": pin.events, "target": pin.target})
            return out

    def routes(self) -> APIRouter | None:
        router = APIRouter()
        guard = self.ctx.guard
        ep = "/admin/drift/references"

        @router.get(ep, tags=["drift"])
        async def list_references(request: Request) -> dict[str, object]:
            guard.authorize(request, "admin", ep)
            specs = {m: self.spec_for(m).model_dump() for m in sorted({k[0] for k in self._models}
                                                                      | set(self.cfg.models))}
            return {"references": self.describe_references(), "specs": specs}

        ep_put = "/admin/drift/references/{model}"

        @router.put(ep_put, tags=["drift"])
        async def put_reference(model: str, request: Request) -> dict[str, object]:
            guard.authorize(request, "admin", ep_put)
            body = await guard.read_body(request, ep_put)
            try:
                doc = orjson.loads(body) if body else {}
                if not isinstance(doc, dict):
                    raise ValueError("body must be a JSON object")
                who = str(doc.pop("who", "") or "")[:200]
                spec = ReferenceConfig.model_validate(doc)
            except ValidationError as exc:
                first = exc.errors()[0]
                loc = ".".join(str(p) for p in first["loc"]) or "body"
                raise guard.refuse(ep_put, "invalid", 400, f"{loc}: {first['msg']}") from None
            except ValueError as exc:
                raise guard.refuse(ep_put, "invalid", 400, str(exc)) from None
            try:
                self.set_reference(model, spec, who=who)
            except ConfigError as exc:
                raise HTTPException(400, str(exc)) from None
            return {"model": model, "reference": spec.model_dump()}

        return router


def _ks_job(job: tuple[Reference, WindowSnapshot]) -> tuple[KsResult, float]:
    """One numeric feature's KS test and PSI (runs in a pool thread; sorts the current window there)."""
    ref, snap = job
    cur = snap.distribution()
    if ref.ecdf is None or cur is None:
        raise ValueError("numeric test without a numeric distribution")
    return ks_2samp_fast(ref.ecdf, cur), psi_numeric(ref.ecdf, cur)
