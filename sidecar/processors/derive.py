"""Derives per model/version SLIs from consecutive Triton scrapes.

Triton exports cumulative counters (requests, failures by reason, per-stage microseconds) that reset to zero
when the server restarts or a model is reloaded. Between two scrapes every counter's increase is computed the way
Prometheus' ``rate()`` does it: a value lower than the previous one is a reset, and the increase is the new value
itself (counting from zero), so a restart never produces a negative or spiking rate. A counter absent from the
previous good scrape (a version loaded or reloaded since) also counts from zero: its first value is its increase,
so requests served between a reload and the next scrape are counted.

Rates describe the last scrape interval; the ratios (error ratio, inferences per execution, cache hit ratio) are
summed over the last ``ratio_window_s`` of intervals so they hold still from one scrape to the next. Both are
dropped from the exposition as soon as a scrape fails or a version disappears, so stale numbers are never reported
as fresh. Reset-corrected cumulative counters (``*_total``) are exported too, so Prometheus can apply its own
``rate()`` over any window; a version that goes and comes back continues its totals.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Iterator
from dataclasses import dataclass

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric

from sidecar.processors.probe_share import ProbeShare
from sidecar.processors.ratio_window import RatioWindow
from sidecar.processors.triton_snapshot import PASSTHROUGH, STAGES, Key, ModelSnapshot, snapshot_models

__all__ = ["STAGES", "Deriver", "ModelSnapshot", "snapshot_models"]


@dataclass
class _Derived:
    dt: float
    rates: dict[str, float]
    failure_rates: dict[str, float]
    error_ratio: float | None
    stage_avg_s: dict[str, float]
    batch: float | None
    cache_hit_ratio: float | None


class Deriver:
    """Holds the previous scrape and the reset-corrected totals; ``update`` is O(series)."""

    def __init__(self, ratio_window_s: float = 60.0, max_models: int = 500, probes: ProbeShare | None = None) -> None:
        self.ratio_window_s = ratio_window_s
        self.probes = probes  # the model probe's requests, taken out of every SLI (probe_share.py)
        self.max_models = max_models
        self._prev: dict[Key, ModelSnapshot] = {}
        self._prev_t: float | None = None
        self._totals: dict[Key, dict[str, float]] = {}
        self._fail_totals: dict[Key, dict[str, float]] = {}
        # Totals and reset counts of versions Triton stopped serving, so a reload continues them (bounded).
        self._dormant: OrderedDict[Key, tuple[dict[str, float], dict[str, float], int]] = OrderedDict()
        self._windows: dict[Key, RatioWindow] = {}
        self.model_resets: dict[Key, int] = {}
        self._derived: dict[Key, _Derived] = {}
        self._current: dict[Key, ModelSnapshot] = {}
        self._passthrough: list[tuple[str, dict[str, str], float]] = []
        self.resets = 0  # counter series seen to reset
        self.fresh = False

    @property
    def models(self) -> list[Key]:
        return sorted(self._current)

    def mark_stale(self) -> None:
        """A scrape failed: stop reporting interval values.

        The last good scrape is kept, so the next good one derives over the whole gap (as ``rate()`` over a
        window spanning it would), with any reset in between handled as a reset.
        """
        self.fresh = False
        self._derived = {}
        self._passthrough = []

    def update(
        self, models: dict[Key, ModelSnapshot], passthrough: list[tuple[str, dict[str, str], float]], now: float
    ) -> None:
        prev, prev_t = self._prev, self._prev_t
        dt = (now - prev_t) if prev_t is not None else 0.0
        derived: dict[Key, _Derived] = {}
        if self.probes is not None:
            self.probes.begin(models.keys(), prev_t is not None)
        for key, snap in models.items():
            if key not in self._totals:
                dormant = self._dormant.pop(key) if key in self._dormant else None
                totals, ftotals, resets = dormant or ({}, {}, -1)
                # Seen before and absent from the last good scrape: the version was reloaded, one reset.
                self.model_resets[key] = resets + 1 if resets >= 0 else 0
                self._totals[key], self._fail_totals[key] = totals, ftotals
            totals, ftotals = self._totals[key], self._fail_totals[key]
            old = prev.get(key)
            # Without any earlier good scrape nothing is known of when the counts happened: no increase yet.
            known = prev_t is not None
            before = self.resets
            deltas = self._increases(snap.counters, old.counters if old else {}, totals, known)
            fdeltas = self._increases(snap.failures, old.failures if old else {}, ftotals, known)
            if self.resets > before:
                self.model_resets[key] = self.model_resets.get(key, 0) + 1
            probed = self.probes.take(key, deltas, fdeltas, totals, ftotals) if self.probes and known else 0.0
            if known and dt > 0:
                window = self._windows.get(key)
                if window is None:
                    window = self._windows[key] = RatioWindow(self.ratio_window_s)
                derived[key] = self._derive(deltas, fdeltas, dt, window, now, probed)
        # What Triton no longer serves disappears from our exposition; its totals wait (bounded) for a reload.
        for gone in [k for k in self._totals if k not in models]:  # oldest first, so eviction is too
            self._dormant[gone] = (self._totals.pop(gone), self._fail_totals.pop(gone), self.model_resets.pop(gone, 0))
            self._windows.pop(gone, None)
            while len(self._dormant) > self.max_models:
                self._dormant.popitem(last=False)
        self._prev, self._prev_t = models, now
        self._current = models
        self._derived = derived
        self._passthrough = passthrough
        self.fresh = True

    def _increases(
        self, new: dict[str, float], old: dict[str, float], totals: dict[str, float], known: bool
    ) -> dict[str, float]:
        out: dict[str, float] = {}
        for fld, v in new.items():
            o = old.get(fld)
            if o is None:
                # Absent from the previous good scrape: the counter started from zero since. On the very first
                # scrape the total starts at Triton's value, but no increase is claimed for the interval.
                d = v if known else 0.0
                totals[fld] = totals.get(fld, 0.0) + v
            else:
                if v < o:
                    self.resets += 1
                    d = v
                else:
                    d = v - o
                totals[fld] = totals.get(fld, 0.0) + d
            out[fld] = d
        return out

    @staticmethod
    def _derive(
        deltas: dict[str, float],
        fdeltas: dict[str, float],
        dt: float,
        window: RatioWindow,
        now: float,
        probed: float = 0.0,
    ) -> _Derived:
        success = deltas.get("success", 0.0)
        failed = sum(fdeltas.values())
        total = success + failed
        stage_avg: dict[str, float] = {}
        if success > 0:  # users' requests; Triton's stage times include the probes' (``probed``) too
            for stage in STAGES:
                us = deltas.get(f"us_{stage}")
                if us is not None:
                    stage_avg[stage] = us / (success + probed) / 1e6
        w_success, w_failed, w_inferences, w_execs, w_hits, w_misses = window.add(
            now,
            (
                success,
                failed,
                deltas.get("inferences", 0.0),
                deltas.get("executions", 0.0),
                deltas.get("cache_hits", 0.0),
                deltas.get("cache_misses", 0.0),
            ),
        )
        w_total = w_success + w_failed
        # Like with like: Triton's inference count covers successful requests only, its execution count every
        # execution, failed ones included. Executions that served a successful request number at most the
        # executions and at most the successful requests (each serves one or more), so inferences over the smaller
        # of the two is exact without batching or without failures, and otherwise never above the true batch size.
        execs = min(w_execs, w_success)
        batch = max(1.0, w_inferences / execs) if execs > 0 else None
        lookups = w_hits + w_misses
        has_cache = "cache_hits" in deltas and "cache_misses" in deltas
        return _Derived(
            dt=dt,
            rates={
                "total": total / dt,
                "success": success / dt,
                "failure": failed / dt,
                "inferences": deltas.get("inferences", 0.0) / dt,
            },
            failure_rates={r: d / dt for r, d in fdeltas.items()},
            error_ratio=(w_failed / w_total) if w_total > 0 else None,
            stage_avg_s=stage_avg,
            batch=batch,
            cache_hit_ratio=w_hits / lookups if has_cache and lookups > 0 else None,
        )

    def rates(self, model: str, version: str) -> dict[str, float] | None:
        d = self._derived.get((model, version))
        return dict(d.rates) if d else None

    def interval(self, model: str, version: str) -> tuple[float, float, float, dict[str, float]] | None:
        """The last scrape interval of a version, reset-corrected: (seconds, successes, failures, average
        seconds per successful request by stage); None when stale or not derived yet."""
        d = self._derived.get((model, version))
        if d is None:
            return None
        return d.dt, d.rates["success"] * d.dt, d.rates["failure"] * d.dt, dict(d.stage_avg_s)

    def error_ratio(self, model: str, version: str) -> float | None:
        d = self._derived.get((model, version))
        return d.error_ratio if d else None

    def collect(self, gpu_labels: dict[str, dict[str, str]] | None = None) -> Iterator[Metric]:
        mv = ["model", "version"]
        req = GaugeMetricFamily(
            "sidecar_model_requests_per_second",
            "Inference requests per second over the last scrape interval (success + failure).",
            labels=mv,
        )
        ok = GaugeMetricFamily(
            "sidecar_model_successes_per_second",
            "Successful inference requests per second over the last scrape interval.",
            labels=mv,
        )
        fail = GaugeMetricFamily(
            "sidecar_model_failures_per_second",
            "Failed inference requests per second over the last scrape interval, by reason.",
            labels=[*mv, "reason"],
        )
        err = GaugeMetricFamily(
            "sidecar_model_error_ratio",
            "Failed / all requests over the ratio window (triton.ratio_window_secs; absent with no traffic).",
            labels=mv,
        )
        stage = GaugeMetricFamily(
            "sidecar_model_stage_average_seconds",
            "Average time per successful request in each stage over the last scrape interval.",
            labels=[*mv, "stage"],
        )
        batch = GaugeMetricFamily(
            "sidecar_model_inferences_per_execution",
            "Batch efficiency: inferences of successful requests per execution of successful "
            "requests over the ratio window (at least 1).",
            labels=mv,
        )
        cache = GaugeMetricFamily(
            "sidecar_model_cache_hit_ratio", "Response-cache hits / lookups over the ratio window.", labels=mv
        )
        for (m, v), d in sorted(self._derived.items()):
            req.add_metric([m, v], d.rates["total"])
            ok.add_metric([m, v], d.rates["success"])
            for reason, r in sorted(d.failure_rates.items()):
                fail.add_metric([m, v, reason], r)
            if d.error_ratio is not None:
                err.add_metric([m, v], d.error_ratio)
            for s, avg in d.stage_avg_s.items():
                stage.add_metric([m, v, s], avg)
            if d.batch is not None:
                batch.add_metric([m, v], d.batch)
            if d.cache_hit_ratio is not None:
                cache.add_metric([m, v], d.cache_hit_ratio)
        yield from (req, ok, fail, err, stage, batch, cache)

        pending = GaugeMetricFamily(
            "sidecar_model_pending_requests", "Requests queued or executing in Triton right now.", labels=mv
        )
        # Triton's summaries re-exported as real summaries in seconds (quantiles over Triton's own window).
        quant = Metric(
            "sidecar_model_stage_latency_seconds",
            "Triton's latency summary per stage: quantiles over Triton's window, count and sum since Triton started.",
            "summary",
        )
        if self.fresh:
            for (m, v), snap in sorted(self._current.items()):
                if snap.pending is not None:
                    pending.add_metric([m, v], snap.pending)
                # OpenMetrics wants each label set's quantiles, _count and _sum together (strict parsers refuse
                # interleaved groups), so samples are emitted stage by stage.
                by_stage: dict[str, list[tuple[str, float]]] = {}
                for (s, q), val in sorted(snap.quantiles.items()):
                    by_stage.setdefault(s, []).append((q, val))
                for s in sorted(by_stage.keys() | snap.summary_totals.keys()):
                    lab = {"model": m, "version": v, "stage": s}
                    for q, val in by_stage.get(s, []):
                        quant.add_sample(quant.name, {**lab, "quantile": q}, val)
                    if s in snap.summary_totals:
                        count, total = snap.summary_totals[s]
                        quant.add_sample(quant.name + "_count", lab, count)
                        quant.add_sample(quant.name + "_sum", lab, total)
        yield pending
        yield quant

        names = {
            "success": ("sidecar_model_request_success", "Successful requests (reset-corrected)."),
            "inferences": ("sidecar_model_inferences", "Inferences, counting each batch item (reset-corrected)."),
            "executions": ("sidecar_model_executions", "Model executions (reset-corrected)."),
        }
        fams = {k: CounterMetricFamily(n, h, labels=mv) for k, (n, h) in names.items()}
        failure_total = CounterMetricFamily(
            "sidecar_model_request_failure", "Failed requests by reason (reset-corrected).", labels=[*mv, "reason"]
        )
        stage_total = CounterMetricFamily(
            "sidecar_model_stage_duration_seconds",
            "Cumulative time successful requests spent in each stage (reset-corrected).",
            labels=[*mv, "stage"],
        )
        for (m, v), totals in sorted(self._totals.items()):
            for k, fam in fams.items():
                if k in totals:
                    fam.add_metric([m, v], totals[k])
            for s in STAGES:
                if f"us_{s}" in totals:
                    stage_total.add_metric([m, v, s], totals[f"us_{s}"] / 1e6)
            for reason, val in sorted(self._fail_totals.get((m, v), {}).items()):
                failure_total.add_metric([m, v, reason], val)
        resets = CounterMetricFamily(
            "sidecar_triton_model_resets",
            "Times a version's counters started again from zero (Triton restarted or the "
            "version was reloaded), one per version per event.",
            labels=mv,
        )
        for m, v in sorted(self._totals):
            resets.add_metric([m, v], self.model_resets.get((m, v), 0))
        yield from fams.values()
        yield failure_total
        yield stage_total
        yield resets

        yield from self._collect_passthrough(gpu_labels or {})

    def _collect_passthrough(self, gpu_labels: dict[str, dict[str, str]]) -> Iterator[Metric]:
        fams: dict[str, GaugeMetricFamily | CounterMetricFamily] = {}
        for tname, lab, value in self._passthrough:
            ours, typ, scale, help_ = PASSTHROUGH[tname]
            labels = dict(lab)
            uuid = labels.get("gpu_uuid")
            if uuid is not None:
                # Join with the NVML/DCGM view on the GPU's UUID so panels can show index and name; the keys are
                # fixed (empty when unknown) because a family's label set must not vary between samples.
                known = gpu_labels.get(uuid, {})
                labels["gpu"] = known.get("index", known.get("gpu", ""))
                labels["gpu_name"] = known.get("name", "")
            names = sorted(labels)
            fam = fams.get(ours)
            if fam is None:
                fam = fams[ours] = (
                    CounterMetricFamily(ours, help_, labels=names)
                    if typ == "counter"
                    else GaugeMetricFamily(ours, help_, labels=names)
                )
            fam.add_metric([labels[n] for n in names], value * scale)
        yield from fams.values()
