"""Fleet business counters: per business check, model and version, the sums and counts the check aggregates,
and for a quantile check counts in bins frozen at the drift reference's quantiles of the same field, exported
for rule engines to merge across replicas (docs/fleet.md, "Business checks across replicas").

A mean is the sum of sums over the sum of counts, a ratio the sum of sums over the sum of denominators, a rate
the sum of sums over the window; a quantile comes from the merged bins (``histogram_quantile``). The counters
count what arrived (as the fleet bins do), not by event timestamp as the per-sidecar check's buckets do. The
check's settings ride along as gauges (threshold, minimum events), so the generated rules need no config.
"""

from __future__ import annotations

import logging
import math
import threading
from collections.abc import Iterator, Mapping
from dataclasses import dataclass

import numpy as np
from prometheus_client import CollectorRegistry, Counter, Gauge
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, HistogramMetricFamily, Metric
from prometheus_client.registry import Collector
from prometheus_client.samples import Sample

from sidecar.checks.business.config import BusinessCheckConfig, parse_field_ref
from sidecar.checks.business.series import extract
from sidecar.checks.drift.references import Reference
from sidecar.checks.fleet.bins import FrozenBins, freeze
from sidecar.checks.fleet.check import CLASS, SCORE, ReferenceSource
from sidecar.checks.fleet.config import FleetConfig
from sidecar.clock import Clock
from sidecar.component import Passive, Role
from sidecar.model import Batch, EventColumns, Finding

__all__ = ["FleetBusiness", "reference_feature"]

_LABELS = ["check", "model", "version"]
_SETTINGS = ["check", "aggregate", "quantile", "compare", "direction"]


def reference_feature(field: str) -> str | None:
    """The drift feature whose reference a quantile check's bins are frozen at: score -> _score,
    features.x -> x; None for a field the drift check holds no reference of (label, count, fields.*)."""
    head, key = parse_field_ref(field)
    return SCORE if head == "score" else key if head == "features" and key != CLASS else None


@dataclass
class _Check:
    name: str
    cfg: BusinessCheckConfig
    head: str
    key: str
    den_ref: tuple[str, str] | None
    feature: str | None  # quantile checks: the drift feature whose reference sets the bins


@dataclass
class _Series:
    events: int = 0
    total: float = 0.0
    den: float = 0.0
    bins: FrozenBins | None = None
    counts: np.ndarray | None = None  # quantile checks: int64 per bin


class FleetBusiness(Passive):
    name = "fleet_business"
    role = Role.CHECK

    def __init__(
        self,
        cfg: FleetConfig,
        *,
        checks: Mapping[str, BusinessCheckConfig],
        references: ReferenceSource,
        registry: CollectorRegistry,
        clock: Clock,
        logger: logging.Logger | None = None,
    ) -> None:
        self.cfg = cfg
        self.references = references
        self.clock = clock
        self._log = logger or logging.getLogger("sidecar.fleet.business")
        self._lock = threading.Lock()
        self.checks = [
            _Check(
                n,
                c,
                *parse_field_ref(c.field),
                den_ref=parse_field_ref(c.denominator) if c.denominator else None,
                feature=reference_feature(c.field) if c.aggregate == "quantile" else None,
            )
            for n, c in sorted(checks.items())
        ]
        self._series: dict[tuple[str, str, str], _Series] = {}
        self._frozen: dict[tuple[str, str, str], tuple[Reference, FrozenBins | None]] = {}
        self.c_skipped = Counter(
            "sidecar_fleet_business_values_skipped",
            "Event values the fleet business counters did not count, by check and reason: missing_field, "
            "not_numeric, no_reference (a quantile check whose field has no file or pinned drift reference yet: "
            "no bins), series_limit (checks.fleet.max_series reached).",
            ["check", "reason"],
            registry=registry,
        )
        self.g_series = Gauge("sidecar_fleet_business_series", "Check/model/version series counted.", registry=registry)
        registry.register(_Collector(self))
        self.refresh()

    # ---- references (worker thread) --------------------------------------------------------------
    def evaluate(self, now: float) -> list[Finding]:
        """Re-reads the references (verdicts come from the rule engine, so no findings here)."""
        self.refresh()
        return []

    def refresh(self) -> None:
        """Freezes the bins of each quantile check's reference; a series whose reference id changed starts
        again from zero (the old id's counts never add to the new one's)."""
        refs = self.references.frozen_references()
        wanted = {c.feature for c in self.checks if c.feature is not None}
        made = {}
        for k, ref in refs.items():
            if k[2] in wanted:
                old = self._frozen.get(k)
                hit = old is not None and old[0] is ref
                made[k] = old if hit and old is not None else (ref, freeze(ref, self.cfg.business_bins, 1))
        with self._lock:
            self._frozen = made
            for (check, model, version), s in list(self._series.items()):
                chk = next((c for c in self.checks if c.name == check), None)
                if chk is None or chk.feature is None:
                    continue
                fb = self._bins_for(chk, model, version)
                if fb is None or s.bins is None or fb.ref_id != s.bins.ref_id:
                    self._series[(check, model, version)] = _Series(bins=fb, counts=_zeros(fb))

    def _bins_for(self, chk: _Check, model: str, version: str) -> FrozenBins | None:
        spec = self.references.spec_for(model)
        ver = "*" if spec.mode == "file" else (spec.pinned_version or version) if spec.mode == "pinned" else None
        got = None if ver is None or chk.feature is None else self._frozen.get((model, ver, chk.feature))
        return None if got is None else got[1]

    # ---- observe (event loop) --------------------------------------------------------------------
    def observe(self, batch: Batch) -> None:
        if batch.kind != "events":
            return
        skipped: dict[tuple[str, str], int] = {}
        with self._lock:
            for chk in self.checks:
                only = chk.cfg.model
                groups: dict[tuple[str, str, str], list[tuple[float, float]]] = {}
                for ev in batch.items:
                    if only is not None and ev.model != only:
                        continue
                    value = extract(ev, chk.head, chk.key)
                    den = 0.0 if chk.den_ref is None else extract(ev, *chk.den_ref)
                    if value is None or den is None:
                        skipped[(chk.name, "missing_field")] = skipped.get((chk.name, "missing_field"), 0) + 1
                    elif not (math.isfinite(value) and math.isfinite(den)):
                        skipped[(chk.name, "not_numeric")] = skipped.get((chk.name, "not_numeric"), 0) + 1
                    else:
                        groups.setdefault((chk.name, ev.model, ev.version), []).append((value, den))
                for key, pairs in groups.items():
                    arr = np.asarray(pairs, dtype=np.float64)
                    if reason := self._count(chk, key, arr[:, 0], arr[:, 1]):
                        skipped[(chk.name, reason)] = skipped.get((chk.name, reason), 0) + len(pairs)
        for (check, reason), n in skipped.items():
            self.c_skipped.labels(check, reason).inc(n)

    def observe_columns(self, batch: Batch) -> None:
        """An ``event_columns`` batch, as arrays: the same counts as ``observe`` of the same events. Such an
        event has no label and no ``fields`` (a check of those skips it as a missing field), and a NaN score
        is an event without one."""
        if batch.kind != "event_columns":
            return
        skipped: dict[tuple[str, str], int] = {}
        with self._lock:
            for chk in self.checks:
                for b in batch.items:
                    if not isinstance(b, EventColumns) or (chk.cfg.model is not None and b.model != chk.cfg.model):
                        continue
                    vals = _column(b, chk.head, chk.key)
                    dens = np.zeros(b.n) if chk.den_ref is None else _column(b, *chk.den_ref)
                    ok = ~(np.isnan(vals) | np.isnan(dens))
                    if missing := int(b.n - ok.sum()):
                        skipped[(chk.name, "missing_field")] = skipped.get((chk.name, "missing_field"), 0) + missing
                    if missing < b.n and (
                        reason := self._count(chk, (chk.name, b.model, b.version), vals[ok], dens[ok])
                    ):
                        skipped[(chk.name, reason)] = skipped.get((chk.name, reason), 0) + b.n - missing
        for (check, reason), n in skipped.items():
            self.c_skipped.labels(check, reason).inc(n)

    def _count(self, chk: _Check, key: tuple[str, str, str], vals: np.ndarray, dens: np.ndarray) -> str | None:
        """Adds one series' values (caller holds the lock); the reason when they were not counted."""
        s = self._series.get(key)
        if s is None:
            fb = self._bins_for(chk, key[1], key[2]) if chk.feature is not None else None
            if chk.cfg.aggregate == "quantile" and (fb is None or fb.kind != "numeric"):
                return "no_reference"
            if len(self._series) >= self.cfg.max_series:
                return "series_limit"
            s = self._series[key] = _Series(bins=fb, counts=_zeros(fb))
            self.g_series.set(len(self._series))
        s.events += vals.shape[0]
        s.total += float(vals.sum())
        s.den += float(dens.sum())
        if s.bins is not None and s.counts is not None:
            s.counts += s.bins.count_numbers(vals)[0]
        return None

    def snapshot(self) -> list[tuple[tuple[str, str, str], _Series]]:
        """A copy of every series: (check, model, version) and its sums, counts and bins."""
        with self._lock:
            return [
                (k, _Series(s.events, s.total, s.den, s.bins, None if s.counts is None else s.counts.copy()))
                for k, s in sorted(self._series.items())
            ]


def _column(b: EventColumns, head: str, key: str) -> np.ndarray:
    """The values a field reference reads from a block, NaN where an event has none."""
    if head == "count":
        return np.ones(b.n)
    col = b.score if head == "score" else b.features.get(key) if head == "features" else None
    return np.full(b.n, np.nan) if col is None else np.asarray(col, dtype=np.float64)


def _zeros(fb: FrozenBins | None) -> np.ndarray | None:
    return None if fb is None else np.zeros(fb.n_bins, dtype=np.int64)


class _Collector(Collector):
    def __init__(self, owner: FleetBusiness) -> None:
        self.owner = owner

    def describe(self) -> list[Metric]:
        return []

    def collect(self) -> Iterator[Metric]:
        events = CounterMetricFamily(
            "sidecar_fleet_business_events", "Events a business check took, per model/version.", labels=_LABELS
        )
        total = CounterMetricFamily(
            "sidecar_fleet_business_sum", "Sum of the business check's field over the events taken.", labels=_LABELS
        )
        den = CounterMetricFamily(
            "sidecar_fleet_business_denominator", "Sum of a ratio check's denominator field.", labels=_LABELS
        )
        hist = HistogramMetricFamily(
            "sidecar_fleet_business_bin",
            "A quantile check's values in bins frozen at the drift reference's quantiles of the same field "
            "(le: upper edge), per reference id; histogram_quantile over the fleet's sum is the fleet quantile.",
            labels=[*_LABELS, "ref_id"],
        )
        threshold = GaugeMetricFamily(
            "sidecar_fleet_business_threshold",
            "A business check's threshold, its settings as labels (the fleet rules read them).",
            labels=_SETTINGS,
        )
        min_events = GaugeMetricFamily(
            "sidecar_fleet_business_min_events",
            "Fewest events in the window (window=current) or baseline (window=baseline) the check decides on.",
            labels=["check", "window"],
        )
        for chk in self.owner.checks:
            c = chk.cfg
            q = "" if c.quantile is None else repr(c.quantile)
            threshold.add_metric([chk.name, c.aggregate, q, c.compare, c.direction], c.threshold)
            min_events.add_metric([chk.name, "current"], c.min_events)
            min_events.add_metric([chk.name, "baseline"], c.min_baseline_events)
        ratio = {chk.name for chk in self.owner.checks if chk.den_ref is not None}
        for key, s in self.owner.snapshot():
            lv = list(key)
            events.add_metric(lv, s.events)
            total.add_metric(lv, s.total)
            if key[0] in ratio:
                den.add_metric(lv, s.den)
            if s.bins is not None and s.counts is not None:
                cum = np.cumsum(s.counts)
                hist.add_metric(
                    [*lv, s.bins.ref_id], [(le, float(c)) for le, c in zip(s.bins.labels, cum, strict=True)], None
                )
                names = dict(zip([*_LABELS, "ref_id"], [*lv, s.bins.ref_id], strict=True))
                hist.samples.append(Sample("sidecar_fleet_business_bin_count", names, float(cum[-1])))
        yield from (events, total, den, hist, threshold, min_events)
