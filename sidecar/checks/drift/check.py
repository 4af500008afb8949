"""The drift check: per model, version and feature, is the current window still like the reference?

A thin component over its parts: ``registry`` (kinds, windows, name slots), ``refs`` (file / pinned / rolling
references), ``evaluator`` (tests, Benjamini-Hochberg, floors, sustain), ``persistence`` (store rows) and
``metrics`` (the gauges it exports). ``observe`` runs on the event loop (the bus) and only appends into bounded
windows; ``evaluate`` runs in the service's worker thread. One lock guards the windows; statistics are
computed outside it on snapshots.
"""

from __future__ import annotations

import logging
import math
import threading
import time
from typing import Any

from fastapi import APIRouter
from prometheus_client import CollectorRegistry
from pydantic import ValidationError

from sidecar.checks.drift.api import drift_router
from sidecar.checks.drift.batch_observe import observe_batch, observe_blocks
from sidecar.checks.drift.config import DriftConfig, ReferenceConfig
from sidecar.checks.drift.evaluator import Evaluator, FeatureResult, ks_job
from sidecar.checks.drift.metrics import DriftMetrics
from sidecar.checks.drift.multiscale import MultiScale
from sidecar.checks.drift.persistence import DriftStore
from sidecar.checks.drift.references import Reference
from sidecar.checks.drift.refs import NoReference, Pinned, References
from sidecar.checks.drift.registry import CLASS, SCORE, SeriesKey, WindowRegistry
from sidecar.checks.stats.windows import FeatureWindow, WindowSnapshot
from sidecar.clock import Clock
from sidecar.component import Bus, Readiness, Role
from sidecar.httpguard import RequestGuard
from sidecar.model import Batch, Change, Event, Finding
from sidecar.store import Store

__all__ = ["DriftCheck"]


class DriftCheck:
    name = "drift"
    role = Role.CHECK

    def __init__(
        self,
        cfg: DriftConfig,
        *,
        registry: CollectorRegistry,
        clock: Clock,
        store: Store,
        bus: Bus,
        guard: RequestGuard,
        logger: logging.Logger | None = None,
    ) -> None:
        """``bus`` takes the reference changes it publishes (the wiring subscribes ``observe`` to events);
        ``guard`` authorizes its admin API."""
        self.cfg = cfg
        self.clock = clock
        self.bus = bus
        self.guard = guard
        self._log = logger or logging.getLogger("sidecar.drift")
        self._lock = threading.RLock()
        self.metrics = DriftMetrics(registry)
        self.store = DriftStore(store, self.metrics.c_store_errors, self._log)
        self.registry = WindowRegistry(cfg, self.store, self.metrics.c_dropped)
        self.refs = References(cfg, self.store, self._log)
        self.evaluator = Evaluator(cfg, self._lock, self.store, self.metrics.c_dropped, self.name)
        self.multiscale = MultiScale(cfg, self.store, self.name)
        self._spec_saved: set[str] = set()
        self._last_persist = -math.inf
        self._stopped = False
        self._load_state()
        with self._lock:
            self.refs.load_files(clock.now(), self.registry.kinds)

    # ---- lifecycle -------------------------------------------------------------------------------
    async def start(self) -> None:
        return None

    async def shutdown(self) -> None:
        if self._stopped:
            return
        self._stopped = True
        self.persist(force=True)

    def readiness(self) -> Readiness | None:
        return None

    def spec_for(self, model: str) -> ReferenceConfig:
        return self.refs.spec_for(model)

    def reference_for(self, model: str, version: str, feature: str, now: float) -> Reference | NoReference:
        """The reference, or a reason why there is none yet."""
        with self._lock:
            return self.refs.reference_for(model, version, feature, now)

    def frozen_references(self) -> dict[tuple[str, str, str], Reference]:
        """The file and pinned references held now, by (model, the version a reference is of or "*" for a
        file, feature): a copy for readers outside the check (the fleet bins). Rolling ones are built per look."""
        with self._lock:
            return {k: r for k, r in self.refs.refs.items() if k[2]}

    def current_snapshot(self, model: str, version: str, feature: str) -> WindowSnapshot | None:
        """A copy of one series' current window (read-only, for the drift pages); None when not held."""
        with self._lock:
            win = self.registry.windows.get((model, version, feature))
            return None if win is None else win.snapshot()

    # ---- observe (event loop) --------------------------------------------------------------------
    def observe(self, batch: Batch) -> None:
        """Takes an ``events`` or an ``event_columns`` batch."""
        now = self.clock.now()
        take = observe_blocks if batch.kind == "event_columns" else observe_batch
        with self._lock:
            # The steady state in bulk, the rest one by one: the same result as all one by one.
            rest = take(self.registry, self.refs, self.spec_for, batch.items, now, self.cfg, self.metrics)
            for item in rest:
                if isinstance(item, Event):
                    self._observe_one(item, now)

    def _observe_one(self, e: Event, now: float) -> None:
        reg, refs = self.registry, self.refs
        admitted = reg.admit_model((e.model, e.version), now)
        if admitted is False:
            return
        if admitted and e.model not in self._spec_saved:
            self._spec_saved.add(e.model)
            self.store.save("drift.spec", e.model, self.spec_for(e.model).model_dump_json().encode())
        self.metrics.c_observed.inc()
        ts = min(e.timestamp, now)
        values: dict[str, object] = dict(e.features)
        if self.cfg.monitor_score:
            if e.score is not None or (e.model, SCORE) in reg.kinds:
                values[SCORE] = e.score
            if e.prediction_class is not None or (e.model, CLASS) in reg.kinds:
                values[CLASS] = e.prediction_class
        spec = self.spec_for(e.model)
        pin: Pinned | None = refs.pin_collector(e.model, e.version, spec) if spec.mode == "pinned" else None
        late = False
        for feature, value in values.items():
            kind = reg.kind(e.model, feature, value)
            if kind is None:
                continue
            key = (e.model, e.version, feature)
            win = reg.window(key, kind, now)
            if win is None:
                continue
            reg.remember_kind(e.model, feature, kind)
            if win.accepts(ts, now):
                reg.add(win, kind, ts, value, counted=True)
                reg.dirty.add(key)
            else:
                late = True
            if pin is not None:
                reg.add(refs.pin_window(pin, feature, kind), kind, 0.0, value)
            if spec.mode == "rolling":
                hist = refs.history_window(key, kind, spec)
                if hist.accepts(ts, now):
                    reg.add(hist, kind, ts, value)
        if late:
            self.metrics.c_dropped.labels("late").inc()
        if pin is not None and pin.events >= pin.target:
            refs.freeze_pin(e.model, spec.pinned_version or e.version, pin, now)

    def observe_columns(self, model: str, version: str, ts: float, columns: dict[str, Any]) -> int:
        """Many events of one model/version at one timestamp, one array per feature (a replay, a benchmark,
        a columnar source): the same windows, references and counts as ``observe`` of the same events, at
        numpy speed. Numeric columns take floats (NaN is missing), categorical ones sequences of str or None.
        Returns the number of events taken (0 when the model/version was refused a slot)."""
        lens = {len(c) for c in columns.values()}
        if len(lens) != 1:
            raise ValueError("observe_columns: every column must hold the same number of events")
        n = lens.pop()
        now = self.clock.now()
        with self._lock:
            reg, refs = self.registry, self.refs
            admitted = reg.admit_model((model, version), now)
            if admitted is False:
                return 0
            if admitted and model not in self._spec_saved:
                self._spec_saved.add(model)
                self.store.save("drift.spec", model, self.spec_for(model).model_dump_json().encode())
            self.metrics.c_observed.inc(n)
            ts = min(ts, now)
            spec = self.spec_for(model)
            pin = None
            if spec.mode == "pinned":
                pin = refs.pin_collector(model, version, spec)  # counts one event; the rest below
            take = 0
            if pin is not None:
                take = min(n, pin.target - pin.events + 1)
                pin.events += take - 1
            for feature, col in columns.items():
                first = next((v for v in col if v is not None and v == v), None)
                kind = reg.kind(model, feature, first)
                if kind is None:
                    continue
                key = (model, version, feature)
                win = reg.window(key, kind, now)
                if win is None:
                    continue
                reg.remember_kind(model, feature, kind)
                if not win.accepts(ts, now):
                    self.metrics.c_dropped.labels("late").inc()
                    continue
                reg.add_many(win, kind, ts, col, counted=True)
                reg.dirty.add(key)
                if pin is not None and take:
                    reg.add_many(refs.pin_window(pin, feature, kind), kind, 0.0, col[:take])
                if spec.mode == "rolling":
                    hist = refs.history_window(key, kind, spec)
                    if hist.accepts(ts, now):
                        reg.add_many(hist, kind, ts, col)
            if pin is not None and pin.events >= pin.target:
                refs.freeze_pin(model, spec.pinned_version or version, pin, now)
        return n

    # ---- evaluate (worker thread) ----------------------------------------------------------------
    def evaluate(self, now: float) -> list[Finding]:
        t0 = time.perf_counter()
        ev, ms = self.evaluator, self.multiscale
        multi = self.cfg.method == "multiscale"
        # (series, scale, block end, snapshot, reference); method 'window' has one look per series, scale 0.
        work: list[tuple[SeriesKey, float, float, WindowSnapshot, Reference | NoReference]] = []
        with self._lock:
            self._expire(now)
            for key, win in self.registry.windows.items():
                win.evict(now)
                if not multi:
                    work.append((key, 0.0, now, win.snapshot(), self.refs.reference_for(*key, now)))
                    continue
                for scale, start, end in ms.due(key, now):
                    work.append(
                        (key, scale, end, win.snapshot(start, end), self.refs.reference_for(*key, now, (start, end)))
                    )
            for hist in self.refs.history.values():
                hist.evict(now)
            self.metrics.g_memory.set(
                sum(w.memory_bytes() for w in self.registry.windows.values())
                + sum(w.memory_bytes() for w in self.refs.history.values())
            )
        numeric = {
            i: (ref, snap)
            for i, (_, _, _, snap, ref) in enumerate(work)
            if isinstance(ref, Reference) and ev.ks_ready(snap, ref)
        }
        ks_done = dict(zip(numeric, ev.map(ks_job, list(numeric.values())), strict=True))
        looks: dict[tuple[str, str, float, float], list[FeatureResult]] = {}
        for i, ((model, version, feature), scale, end, snap, ref) in enumerate(work):
            looks.setdefault((model, version, scale, end), []).extend(ev.test(feature, snap, ref, ks_done.get(i)))
        findings: list[Finding] = []
        if multi:
            for (model, version, scale, end), results in sorted(looks.items()):
                ms.record(model, version, scale, end, results)
            for model, version in sorted({(k[0], k[1]) for k in self.registry.windows}):
                findings.extend(ms.findings(model, version, now, self.metrics.export))
        else:
            for (model, version, _, _), results in sorted(looks.items()):
                findings.extend(ev.decide(model, version, results, now, self.metrics.export))
        if now - self._last_persist >= self.cfg.persist_interval_secs:
            self.persist()
            self._last_persist = now
        self.metrics.g_eval.set(time.perf_counter() - t0)
        return findings

    def _expire(self, now: float) -> None:
        """Frees the slots of idle series and model/versions (caller holds the lock)."""
        gone, freed = self.registry.expire(now, self._idle_secs)
        gone_set = set(gone)
        self.evaluator.forget(lambda s: (s[0], s[1], s[2]) in gone_set)
        self.multiscale.forget(lambda s: (s[0], s[1], s[2]) in gone_set)
        for k in gone:
            self.refs.drop_history(k)
            self.metrics.forget(*k)
        for mv in freed:
            self.refs.drop_collector(mv)
        if gone:
            self.metrics.c_expired.inc(len(gone))
            self._log.info("dropped %d drift series idle for over %.0fs", len(gone), self.cfg.series_idle_secs)

    def _idle_secs(self, model: str) -> float:
        spec = self.spec_for(model)
        least = self.cfg.longest_secs + (spec.rolling_offset_secs if spec.mode == "rolling" else 0.0)
        return max(self.cfg.series_idle_secs, least)

    # ---- references ------------------------------------------------------------------------------
    def set_reference(self, model: str, spec: ReferenceConfig, *, who: str = "", source: str = "api") -> None:
        """Change a model's reference (an explicit action): old references are dropped, the change logged."""
        now = self.clock.now()
        with self._lock:
            self.refs.overrides[model] = spec
            self.store.save("drift.override", model, spec.model_dump_json().encode())
            self._reset_model(model)
            if spec.mode == "file":
                self.refs.load_files(now, self.registry.kinds, model)
        self.metrics.c_ref_changes.inc()
        what = f"drift reference of {model} set to {spec.mode}" + (
            f" ({spec.path})"
            if spec.mode == "file"
            else f" (first {spec.pinned_events} events of {spec.pinned_version or 'each version'})"
            if spec.mode == "pinned"
            else ""
        )
        self._record_change(Change(what=what, at=now, who=who, model=model, source=source))

    def _reset_model(self, model: str) -> None:
        self.refs.reset_model(model)
        self.evaluator.forget(lambda k: k[0] == model)
        self.multiscale.forget(lambda k: k[0] == model)

    def _record_change(self, change: Change) -> None:
        self._log.info("change: %s", change.what)
        if self.bus.publish(Batch(kind="changes", source=self.name, items=(change,), received_at=self.clock.now())):
            self._log.error("the change log refused a drift reference change (counted on the bus)")

    def describe_references(self) -> list[dict[str, object]]:
        with self._lock:
            return self.refs.describe()

    def describe_specs(self) -> dict[str, dict[str, Any]]:
        with self._lock:
            models = {k[0] for k in self.registry.models} | set(self.cfg.models)
        return {m: self.spec_for(m).model_dump() for m in sorted(models)}

    def routes(self) -> APIRouter | None:
        return drift_router(self, self.guard)

    # ---- persistence -----------------------------------------------------------------------------
    def persist(self, force: bool = False) -> None:
        """Save changed windows, collectors and histories (references are saved when they freeze)."""
        with self._lock:
            rows = self.registry.persist_rows(force) + self.refs.persist_rows() + self.multiscale.persist_rows()
        self.store.put_many(rows)

    def _load_state(self) -> None:
        for ns, parts, k, v in self.store.rows():
            self._load_row(ns, parts, k, v)
        self._check_config_changes()

    def _load_row(self, ns: str, parts: tuple[str, ...], k: str, v: Any) -> None:
        reg, refs = self.registry, self.refs
        try:
            if ns == "drift.kinds" and len(parts) == 2:
                kind = v.decode() if isinstance(v, bytes) else str(v)
                if kind in ("numeric", "categorical"):
                    reg.kinds[(parts[0], parts[1])] = kind  # type: ignore[assignment]
            elif ns == "drift.window" and len(parts) == 3:
                reg.adopt((parts[0], parts[1], parts[2]), FeatureWindow.from_bytes(v), self.clock.now())
            elif ns == "drift.history" and len(parts) == 3:
                refs.history[(parts[0], parts[1], parts[2])] = FeatureWindow.from_bytes(v)
            elif ns == "drift.ref" and len(parts) == 3:
                refs.refs[(parts[0], parts[1], parts[2])] = Reference.from_bytes(v)
            elif ns == "drift.pinned" and len(parts) == 2:
                refs.pinned[(parts[0], parts[1])] = Pinned.from_bytes(v)
            elif ns == "drift.since" and len(parts) == 4:
                self.evaluator.since[(parts[0], parts[1], parts[2], parts[3])] = float(v)
            elif ns == "drift.looks" and len(parts) == 4:
                self.multiscale.load((parts[0], parts[1], parts[2], parts[3]), v)
            elif ns == "drift.override":
                refs.overrides[k] = ReferenceConfig.model_validate_json(v)
        except (ValueError, KeyError, TypeError, IndexError, ValidationError, RuntimeError):
            self.metrics.c_store_errors.labels("decode").inc()
            self._log.warning("dropping unreadable drift state %s/%s", ns, k)

    def _check_config_changes(self) -> None:
        """A reference spec that differs from the one the stored state was built with is a change."""
        refs = self.refs
        models = sorted(
            {k[0] for k in refs.refs}
            | set(self.cfg.models)
            | {k[0] for k in refs.pinned}
            | {k[0] for k in self.registry.models}
        )
        for model in models:
            spec = self.spec_for(model).model_dump_json()
            old = self.store.get("drift.spec", model)
            old_s = old.decode() if isinstance(old, bytes) else old
            if old_s is not None and old_s != spec:
                self._reset_model(model)
                self.metrics.c_ref_changes.inc()
                self._record_change(
                    Change(
                        what=f"drift reference of {model} changed in config",
                        at=self.clock.now(),
                        model=model,
                        source="config",
                    )
                )
            if old_s != spec:
                self.store.save("drift.spec", model, spec.encode())
            self._spec_saved.add(model)
