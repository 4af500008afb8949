"""The fleet bins component: per model, version and feature, counts of current values in bins frozen at the
drift reference's quantiles, exported for rule engines to merge across replicas (docs/fleet.md).

``observe`` (the event loop) groups a batch's values by series and bins each group with one numpy
``searchsorted``; ``evaluate`` (the worker thread) re-reads the drift check's references and re-freezes the
bins of a changed one (a new reference id: the series starts again from zero under the new id, so counts of
two references never add). A custom collector exports the counters and the references' CDFs.
"""

from __future__ import annotations

import logging
import math
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Protocol

import numpy as np
from prometheus_client import CollectorRegistry, Counter, Gauge
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, HistogramMetricFamily, Metric
from prometheus_client.registry import Collector
from prometheus_client.samples import Sample

from sidecar.checks.drift.config import ReferenceConfig
from sidecar.checks.drift.references import Reference
from sidecar.checks.fleet.bins import FrozenBins, freeze
from sidecar.checks.fleet.config import FleetConfig
from sidecar.clock import Clock
from sidecar.component import Passive, Role
from sidecar.model import Batch, Event, EventColumns, Finding

__all__ = ["FleetBins", "ReferenceSource"]

SCORE, CLASS = "_score", "_class"  # the drift check's names for the score and the predicted class
_LABELS = ["model", "version", "feature", "ref_id"]
PENDING_MAX = 262_144  # columnar values held before they are binned (bounded; binned on every read anyway)
RefKey = tuple[str, str, str]  # (model, the version the reference is of, or "*" for a file; feature)


class ReferenceSource(Protocol):
    """What the fleet bins read of the drift check."""

    def spec_for(self, model: str) -> ReferenceConfig: ...

    def frozen_references(self) -> dict[RefKey, Reference]: ...


@dataclass
class _Series:
    bins: FrozenBins
    counts: np.ndarray  # int64 per bin
    missing: int = 0
    total: float = 0.0  # sum of the binned numeric values (the histogram's _sum)
    pending: list[np.ndarray] = field(default_factory=list)  # finite numeric columns not binned yet


class FleetBins(Passive):
    name = "fleet"
    role = Role.CHECK

    def __init__(
        self,
        cfg: FleetConfig,
        *,
        references: ReferenceSource,
        registry: CollectorRegistry,
        clock: Clock,
        logger: logging.Logger | None = None,
    ) -> None:
        self.cfg = cfg
        self.references = references
        self.clock = clock
        self._log = logger or logging.getLogger("sidecar.fleet")
        self._lock = threading.Lock()
        self._frozen: dict[RefKey, FrozenBins] = {}
        self._made: dict[RefKey, tuple[Reference, FrozenBins | None]] = {}
        self._series: dict[RefKey, _Series] = {}  # (model, event version, feature)
        self._ref_version: dict[tuple[str, str], str | None] = {}
        self._pending_values = 0  # values held in the series' pending columns (bounded by PENDING_MAX)
        self.c_unbinned = Counter(
            "sidecar_fleet_values_unbinned",
            "Feature values the fleet bins did not count, by reason: no_reference (the model/version has no file "
            "or frozen pinned reference yet), rolling_reference (not binned), not_in_reference (a feature its "
            "reference lacks), series_limit (checks.fleet.max_series reached).",
            ["reason"],
            registry=registry,
        )
        self.c_ref_changes = Counter(
            "sidecar_fleet_reference_changes",
            "Bins re-frozen because a series' reference id changed.",
            registry=registry,
        )
        self.g_series = Gauge("sidecar_fleet_series", "Model/version/feature series binned.", registry=registry)
        registry.register(_Collector(self))
        self.refresh()

    # ---- references (worker thread) --------------------------------------------------------------
    def evaluate(self, now: float) -> list[Finding]:
        """Re-reads the references (verdicts come from the rule engine, so no findings here)."""
        self.refresh()
        return []

    def refresh(self) -> None:
        refs = self.references.frozen_references()
        made: dict[RefKey, tuple[Reference, FrozenBins | None]] = {}
        for k, ref in refs.items():
            old = self._made.get(k)
            made[k] = (
                old if old is not None and old[0] is ref else (ref, freeze(ref, self.cfg.bins, self.cfg.max_categories))
            )
        frozen = {k: fb for k, (_, fb) in made.items() if fb is not None}
        with self._lock:
            self._flush()  # values taken under the old bins are counted in them
            self._made, self._frozen = made, frozen
            self._ref_version.clear()
            for sk, s in list(self._series.items()):
                fb = self._bins_for(*sk)
                if fb is None:
                    del self._series[sk]
                elif fb.ref_id != s.bins.ref_id:
                    self._series[sk] = _Series(fb, np.zeros(fb.n_bins, dtype=np.int64))
                    self.c_ref_changes.inc()
            self.g_series.set(len(self._series))

    def _resolve(self, model: str, version: str) -> str | None:
        """The version whose reference events of ``model``/``version`` are binned against ("*": a file)."""
        key = (model, version)
        if key in self._ref_version:
            return self._ref_version[key]
        spec = self.references.spec_for(model)
        ver = "*" if spec.mode == "file" else (spec.pinned_version or version) if spec.mode == "pinned" else None
        if len(self._ref_version) < 4 * self.cfg.max_series:
            self._ref_version[key] = ver
        return ver

    def _bins_for(self, model: str, version: str, feature: str) -> FrozenBins | None:
        ver = self._resolve(model, version)
        return None if ver is None else self._frozen.get((model, ver, feature))

    # ---- observe (event loop) --------------------------------------------------------------------
    def observe(self, batch: Batch) -> None:
        if batch.kind != "events":
            return
        groups: dict[RefKey, list[object]] = {}
        unbinned: dict[str, int] = {}
        with self._lock:
            for e in batch.items:
                if not isinstance(e, Event):
                    continue
                ver = self._resolve(e.model, e.version)
                if ver is None:
                    unbinned["rolling_reference"] = unbinned.get("rolling_reference", 0) + len(e.features)
                    continue
                for f, v in e.features.items():
                    groups.setdefault((e.model, e.version, f), []).append(v)
                if e.score is not None:
                    groups.setdefault((e.model, e.version, SCORE), []).append(e.score)
                if e.prediction_class is not None:
                    groups.setdefault((e.model, e.version, CLASS), []).append(e.prediction_class)
            for sk, values in groups.items():
                reason = self._count(sk, values)
                if reason:
                    unbinned[reason] = unbinned.get(reason, 0) + len(values)
        for reason, n in unbinned.items():
            self.c_unbinned.labels(reason).inc(n)

    def observe_columns(self, batch: Batch) -> None:
        """An ``event_columns`` batch: the same counts as ``observe`` of the same events (a NaN score is an
        event without one). A finite column of a numeric series already binned is kept as it is and binned
        later with the series' other kept columns, in one ``searchsorted`` (on every read: ``snapshot``, a
        reference refresh, or past PENDING_MAX values), so the event loop pays a list append per column; a new
        series or a categorical one is counted at once. Every feature value of such a block is finite (the door
        checked it, ``EventColumns``), and a NaN score was left out above."""
        if batch.kind != "event_columns":
            return
        unbinned: dict[str, int] = {}
        with self._lock:
            for b in batch.items:
                if not isinstance(b, EventColumns):
                    continue
                if self._resolve(b.model, b.version) is None:
                    unbinned["rolling_reference"] = unbinned.get("rolling_reference", 0) + b.n * len(b.features)
                    continue
                cols = list(b.features.items())
                if b.score is not None:
                    cols.append((SCORE, b.score[~np.isnan(b.score)]))
                for f, col in cols:
                    s = self._series.get((b.model, b.version, f))
                    if not len(col):
                        continue
                    if s is not None and s.bins.kind == "numeric":  # finite: the door checked every feature
                        s.pending.append(col)
                        self._pending_values += len(col)
                    elif reason := self._count((b.model, b.version, f), col):
                        unbinned[reason] = unbinned.get(reason, 0) + len(col)
            if self._pending_values > PENDING_MAX:
                self._flush()
        for reason, n in unbinned.items():
            self.c_unbinned.labels(reason).inc(n)

    def _flush(self) -> None:
        """Bins every series' pending columns, one search per series (caller holds the lock)."""
        if not self._pending_values:
            return
        for s in self._series.values():
            if s.pending:
                values = s.pending[0] if len(s.pending) == 1 else np.concatenate(s.pending)
                s.pending.clear()
                s.counts += np.bincount(np.searchsorted(s.bins.edges, values, side="left"), minlength=s.bins.n_bins)
                s.total += float(values.sum())
        self._pending_values = 0

    def _count(self, sk: RefKey, values: list[object] | np.ndarray) -> str | None:
        """Bins one series' values (caller holds the lock); the reason when they were not counted."""
        s = self._series.get(sk)
        if s is None:
            ver = self._resolve(sk[0], sk[1])
            fb = self._frozen.get((sk[0], ver or "", sk[2]))
            if fb is None:
                has_any = any(k[0] == sk[0] and k[1] == ver for k in self._frozen)
                return "not_in_reference" if has_any else "no_reference"
            if len(self._series) >= self.cfg.max_series:
                return "series_limit"
            s = self._series[sk] = _Series(fb, np.zeros(fb.n_bins, dtype=np.int64))
            self.g_series.set(len(self._series))
        if s.bins.kind == "numeric":
            self._add(s, values if isinstance(values, np.ndarray) else _floats(values))
            return None
        keys = [_category(v) for v in (values.tolist() if isinstance(values, np.ndarray) else values)]
        present = [k for k in keys if k is not None]
        counts, missing = s.bins.count_categories(present), len(keys) - len(present)
        s.counts += counts
        s.missing += missing
        return None

    @staticmethod
    def _add(s: _Series, arr: np.ndarray) -> None:
        counts, missing = s.bins.count_numbers(arr)
        finite = arr[np.isfinite(arr)]
        s.total += float(finite.sum()) if finite.shape[0] else 0.0
        s.counts += counts
        s.missing += missing

    def snapshot(self) -> list[tuple[RefKey, FrozenBins, np.ndarray, int, float]]:
        """A copy of every series: (model, version, feature), its bins, per-bin counts, missing, sum."""
        with self._lock:
            self._flush()
            return [(k, s.bins, s.counts.copy(), s.missing, s.total) for k, s in sorted(self._series.items())]


def _floats(values: list[object]) -> np.ndarray:
    """Numbers as float64; None, NaN and anything not a number (a string, a list) as NaN (missing)."""
    if not any(isinstance(v, str) for v in values):
        try:
            return np.asarray(values, dtype=np.float64)
        except (TypeError, ValueError):
            pass
    return np.fromiter(
        (float(v) if isinstance(v, bool | int | float) else math.nan for v in values),
        dtype=np.float64,
        count=len(values),
    )


def _category(v: object) -> str | None:
    """The drift check's rule: a string as it is, a number as str(number), None and NaN missing."""
    if isinstance(v, str):
        return v
    if v is None or (isinstance(v, float) and math.isnan(v)):
        return None
    return str(v) if isinstance(v, bool | int | float) else None


class _Collector(Collector):
    def __init__(self, owner: FleetBins) -> None:
        self.owner = owner

    def describe(self) -> list[Metric]:
        return []

    def collect(self) -> Iterator[Metric]:
        hist = HistogramMetricFamily(
            "sidecar_fleet_feature",
            "Current numeric feature values in bins frozen at the reference's quantiles (le: upper edge), per "
            "reference id; sum by (le) across replicas is the fleet's histogram.",
            labels=_LABELS,
        )
        cats = CounterMetricFamily(
            "sidecar_fleet_category",
            "Current categorical feature values per reference category (__other__: the rest, unseen ones too).",
            labels=[*_LABELS, "category"],
        )
        missing = CounterMetricFamily(
            "sidecar_fleet_feature_missing", "Current feature values that were missing or NaN.", labels=_LABELS
        )
        cdf = GaugeMetricFamily(
            "sidecar_fleet_reference_cdf",
            "The reference's CDF at each bin's upper edge (le); lo is the bin's lower edge.",
            labels=[*_LABELS, "le", "lo"],
        )
        share = GaugeMetricFamily(
            "sidecar_fleet_reference_share", "The reference's share per category bin.", labels=[*_LABELS, "category"]
        )
        size = GaugeMetricFamily(
            "sidecar_fleet_reference_size", "The reference's non-missing values (m of the KS test).", labels=_LABELS
        )
        for (model, version, feature), fb, counts, miss, total in self.owner.snapshot():
            lv = [model, version, feature, fb.ref_id]
            size.add_metric(lv, fb.ref_size)
            missing.add_metric(lv, miss)
            if fb.kind == "numeric":
                cum = np.cumsum(counts)
                hist.add_metric(lv, [(le, float(c)) for le, c in zip(fb.labels, cum, strict=True)], sum_value=total)
                if not hist.samples or hist.samples[-1].name != "sidecar_fleet_feature_sum":
                    # prometheus_client leaves _count (and _sum) out when an edge is negative; the rules need _count
                    count = Sample("sidecar_fleet_feature_count", dict(zip(_LABELS, lv, strict=True)), float(cum[-1]))
                    hist.samples.append(count)
                for le, lo, r in zip(fb.labels, fb.lows, fb.ref_cdf, strict=True):
                    cdf.add_metric([*lv, le, lo], r)
            else:
                for cat, c, r in zip(fb.labels, counts, fb.ref_cdf, strict=True):
                    cats.add_metric([*lv, cat], float(c))
                    share.add_metric([*lv, cat], r)
        yield from (hist, cats, missing, cdf, share, size)
