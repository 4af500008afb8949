"""Derives per model/version SLIs from consecutive Triton scrapes.

Triton exports cumulative counters (requests, failures by reason, per-stage microseconds) that reset to zero
when the server restarts or a model is reloaded. Between two scrapes every counter's increase is computed the way
Prometheus' ``rate()`` does it: a value lower than the previous one is a reset, and the increase is the new value
itself (counting from zero), so a restart never produces a negative or spiking rate.

The derived values describe the last scrape interval only; they are dropped from the exposition as soon as a
scrape fails or a model version disappears, so stale numbers are never reported as fresh. Reset-corrected
cumulative counters (``*_total``) are exported too, so Prometheus can apply its own ``rate()`` over any window.
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from dataclasses import dataclass, field

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric

from sidecar.promtext import Exposition

__all__ = ["STAGES", "Deriver", "ModelSnapshot", "snapshot_models"]

# Triton counter family -> our field name.
_COUNTERS = {
    "nv_inference_request_success": "success",
    "nv_inference_count": "inferences",
    "nv_inference_exec_count": "executions",
    "nv_inference_request_duration_us": "us_request",
    "nv_inference_queue_duration_us": "us_queue",
    "nv_inference_compute_input_duration_us": "us_compute_input",
    "nv_inference_compute_infer_duration_us": "us_compute_infer",
    "nv_inference_compute_output_duration_us": "us_compute_output",
    "nv_cache_num_hits_per_model": "cache_hits",
    "nv_cache_num_misses_per_model": "cache_misses",
}
STAGES = ("request", "queue", "compute_input", "compute_infer", "compute_output")
_SUMMARIES = {f"nv_inference_{s}_summary_us": s for s in STAGES}
_FAILURE = "nv_inference_request_failure"
_PENDING = "nv_inference_pending_request_count"

# Server-level Triton gauges and counters re-exported under the sidecar's names, in base units.
_PASSTHROUGH: dict[str, tuple[str, str, float, str]] = {
    # triton name: (our name, type, scale, help)
    "nv_gpu_utilization": ("sidecar_triton_gpu_utilization_ratio", "gauge", 1.0, "GPU utilization (0..1)."),
    "nv_gpu_memory_total_bytes": ("sidecar_triton_gpu_memory_total_bytes", "gauge", 1.0, "GPU memory total."),
    "nv_gpu_memory_used_bytes": ("sidecar_triton_gpu_memory_used_bytes", "gauge", 1.0, "GPU memory used."),
    "nv_gpu_power_usage": ("sidecar_triton_gpu_power_usage_watts", "gauge", 1.0, "GPU power draw."),
    "nv_gpu_power_limit": ("sidecar_triton_gpu_power_limit_watts", "gauge", 1.0, "GPU power limit."),
    "nv_energy_consumption": ("sidecar_triton_gpu_energy_consumption_joules", "counter", 1.0,
                              "GPU energy since Triton started."),
    "nv_cpu_utilization": ("sidecar_triton_cpu_utilization_ratio", "gauge", 1.0, "Host CPU utilization (0..1)."),
    "nv_cpu_memory_total_bytes": ("sidecar_triton_cpu_memory_total_bytes", "gauge", 1.0, "Host memory total."),
    "nv_cpu_memory_used_bytes": ("sidecar_triton_cpu_memory_used_bytes", "gauge", 1.0, "Host memory used."),
    "nv_pinned_memory_pool_total_bytes": ("sidecar_triton_pinned_memory_pool_total_bytes", "gauge", 1.0,
                                          "Pinned memory pool size."),
    "nv_pinned_memory_pool_used_bytes": ("sidecar_triton_pinned_memory_pool_used_bytes", "gauge", 1.0,
                                         "Pinned memory pool in use."),
}

Key = tuple[str, str]  # (model, version)


@dataclass
class ModelSnapshot:
    counters: dict[str, float] = field(default_factory=dict)
    failures: dict[str, float] = field(default_factory=dict)
    pending: float | None = None
    quantiles: dict[tuple[str, str], float] = field(default_factory=dict)  # (stage, quantile) -> seconds
    summary_totals: dict[str, tuple[float, float]] = field(default_factory=dict)  # stage -> (count, sum seconds)


def snapshot_models(
    expo: Exposition, max_models: int
) -> tuple[dict[Key, ModelSnapshot], list[tuple[str, dict[str, str], float]], int]:
    """Group one scrape by model/version; returns (models, server-level passthrough samples, models refused)."""
    models: dict[Key, ModelSnapshot] = {}
    passthrough: list[tuple[str, dict[str, str], float]] = []
    refused: set[Key] = set()
    labels_of = expo.labels
    counters, summaries = _COUNTERS, _SUMMARIES
    for name, raw, value in expo.samples:
        if not name.startswith("nv_inference_") and name not in counters:
            if name in _PASSTHROUGH:
                passthrough.append((name, labels_of(raw), value))
            continue
        lab = labels_of(raw)
        model = lab.get("model")
        if model is None:
            continue
        key = (model, lab.get("version", ""))
        snap = models.get(key)
        if snap is None:
            if len(models) >= max_models:
                refused.add(key)
                continue
            snap = models[key] = ModelSnapshot()
        fld = counters.get(name)
        if fld is not None:
            snap.counters[fld] = value
        elif name == _FAILURE:
            snap.failures[lab.get("reason", "OTHER")] = value
        elif name == _PENDING:
            snap.pending = value
        else:
            stage = summaries.get(name)
            if stage is not None:
                if "quantile" in lab and not math.isnan(value):
                    snap.quantiles[(stage, lab["quantile"])] = value / 1e6
            elif name.endswith(("_summary_us_count", "_summary_us_sum")):
                base, _, part = name.rpartition("_")
                stage = summaries.get(base)
                if stage is not None:
                    count, total = snap.summary_totals.get(stage, (0.0, 0.0))
                    snap.summary_totals[stage] = (value, total) if part == "count" else (count, value / 1e6)
    return models, passthrough, len(refused)


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

    def __init__(self) -> None:
        self._prev: dict[Key, ModelSnapshot] = {}
        self._prev_t: float | None = None
        self._totals: dict[Key, dict[str, float]] = {}
        self._fail_totals: dict[Key, dict[str, float]] = {}
        self._derived: dict[Key, _Derived] = {}
        self._current: dict[Key, ModelSnapshot] = {}
        self._passthrough: list[tuple[str, dict[str, str], float]] = []
        self.resets = 0
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

    def update(self, models: dict[Key, ModelSnapshot],
               passthrough: list[tuple[str, dict[str, str], float]], now: float) -> None:
        prev, prev_t = self._prev, self._prev_t
        dt = (now - prev_t) if prev_t is not None else 0.0
        derived: dict[Key, _Derived] = {}
        for key, snap in models.items():
            totals = self._totals.setdefault(key, {})
            ftotals = self._fail_totals.setdefault(key, {})
            old = prev.get(key)
            deltas: dict[str, float] = {}
            fdeltas: dict[str, float] = {}
            for fld, v in snap.counters.items():
                d = self._increase(old.counters.get(fld) if old else None, v)
                deltas[fld] = d
                totals[fld] = totals.get(fld, 0.0) + (v if old is None and fld not in totals else d)
            for reason, v in snap.failures.items():
                d = self._increase(old.failures.get(reason) if old else None, v)
                fdeltas[reason] = d
                ftotals[reason] = ftotals.get(reason, 0.0) + (v if old is None and reason not in ftotals else d)
            if old is not None and dt > 0:
                derived[key] = self._derive(deltas, fdeltas, dt)
        # Forget what Triton no longer reports (model unloaded): its series disappear from our exposition too.
        for gone in set(self._totals) - set(models):
            self._totals.pop(gone, None)
            self._fail_totals.pop(gone, None)
        self._prev, self._prev_t = models, now
        self._current = models
        self._derived = derived
        self._passthrough = passthrough
        self.fresh = True

    def _increase(self, old: float | None, new: float) -> float:
        if old is None:
            return 0.0
        if new < old:
            self.resets += 1
            return new
        return new - old

    @staticmethod
    def _derive(deltas: dict[str, float], fdeltas: dict[str, float], dt: float) -> _Derived:
        success = deltas.get("success", 0.0)
        failed = sum(fdeltas.values())
        total = success + failed
        stage_avg: dict[str, float] = {}
        if success > 0:
            for stage in STAGES:
                us = deltas.get(f"us_{stage}")
                if us is not None:
                    stage_avg[stage] = us / success / 1e6
        execs = deltas.get("executions", 0.0)
        hits, misses = deltas.get("cache_hits"), deltas.get("cache_misses")
        cache = hits / (hits + misses) if hits is not None and misses is not None and hits + misses > 0 else None
        return _Derived(
            dt=dt,
            rates={"total": total / dt, "success": success / dt, "failure": failed / dt,
                   "inferences": deltas.get("inferences", 0.0) / dt},
            failure_rates={r: d / dt for r, d in fdeltas.items()},
            error_ratio=(failed / total) if total > 0 else None,
            stage_avg_s=stage_avg,
            batch=(deltas.get("inferences", 0.0) / execs) if execs > 0 else None,
            cache_hit_ratio=cache,
        )

    def rates(self, model: str, version: str) -> dict[str, float] | None:
        d = self._derived.get((model, version))
        return dict(d.rates) if d else None

    def error_ratio(self, model: str, version: str) -> float | None:
        d = self._derived.get((model, version))
        return d.error_ratio if d else None

    def collect(self, gpu_labels: dict[str, dict[str, str]] | None = None) -> Iterator[Metric]:
        mv = ["model", "version"]
        req = GaugeMetricFamily("sidecar_model_requests_per_second",
                                "Inference requests per second over the last scrape interval (success + failure).",
                                labels=mv)
        ok = GaugeMetricFamily("sidecar_model_successes_per_second",
                               "Successful inference requests per second over the last scrape interval.", labels=mv)
        fail = GaugeMetricFamily("sidecar_model_failures_per_second",
                                 "Failed inference requests per second over the last scrape interval, by reason.",
                                 labels=[*mv, "reason"])
        err = GaugeMetricFamily("sidecar_model_error_ratio",
                                "Failed / all requests over the last scrape interval (absent with no traffic).",
                                labels=mv)
        stage = GaugeMetricFamily("sidecar_model_stage_average_seconds",
                                  "Average time per successful request in each stage over the last scrape interval.",
                                  labels=[*mv, "stage"])
        batch = GaugeMetricFamily("sidecar_model_inferences_per_execution",
                                  "Batch efficiency: inferences per model execution over the last scrape interval.",
                                  labels=mv)
        cache = GaugeMetricFamily("sidecar_model_cache_hit_ratio",
                                  "Response-cache hits / lookups over the last scrape interval.", labels=mv)
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

        pending = GaugeMetricFamily("sidecar_model_pending_requests",
                                    "Requests queued or executing in Triton right now.", labels=mv)
        # Triton's summaries re-exported as real summaries in seconds (quantiles over Triton's own window).
        quant = Metric("sidecar_model_stage_latency_seconds",
                       "Triton's latency summary per stage: quantiles over Triton's window, count and sum since "
                       "Triton started.", "summary")
        if self.fresh:
            for (m, v), snap in sorted(self._current.items()):
                if snap.pending is not None:
                    pending.add_metric([m, v], snap.pending)
                for (s, q), val in sorted(snap.quantiles.items()):
                    quant.add_sample(quant.name, {"model": m, "version": v, "stage": s, "quantile": q}, val)
                for s, (count, total) in sorted(snap.summary_totals.items()):
                    lab = {"model": m, "version": v, "stage": s}
                    quant.add_sample(quant.name + "_count", lab, count)
                    quant.add_sample(quant.name + "_sum", lab, total)
        yield pending
        yield quant

        names = {"success": ("sidecar_model_request_success", "Successful requests (reset-corrected)."),
                 "inferences": ("sidecar_model_inferences", "Inferences, counting each batch item "
                                "(reset-corrected)."),
                 "executions": ("sidecar_model_executions", "Model executions (reset-corrected).")}
        fams = {k: CounterMetricFamily(n, h, labels=mv) for k, (n, h) in names.items()}
        failure_total = CounterMetricFamily("sidecar_model_request_failure",
                                            "Failed requests by reason (reset-corrected).", labels=[*mv, "reason"])
        stage_total = CounterMetricFamily("sidecar_model_stage_duration_seconds",
                                          "Cumulative time successful requests spent in each stage "
                                          "(reset-corrected).", labels=[*mv, "stage"])
        for (m, v), totals in sorted(self._totals.items()):
            for k, fam in fams.items():
                if k in totals:
                    fam.add_metric([m, v], totals[k])
            for s in STAGES:
                if f"us_{s}" in totals:
                    stage_total.add_metric([m, v, s], totals[f"us_{s}"] / 1e6)
            for reason, val in sorted(self._fail_totals.get((m, v), {}).items()):
                failure_total.add_metric([m, v, reason], val)
        yield from fams.values()
        yield failure_total
        yield stage_total

        yield from self._collect_passthrough(gpu_labels or {})

    def _collect_passthrough(self, gpu_labels: dict[str, dict[str, str]]) -> Iterator[Metric]:
        fams: dict[str, GaugeMetricFamily | CounterMetricFamily] = {}
        for tname, lab, value in self._passthrough:
            ours, typ, scale, help_ = _PASSTHROUGH[tname]
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
                fam = fams[ours] = (CounterMetricFamily(ours, help_, labels=names) if typ == "counter"
                                    else GaugeMetricFamily(ours, help_, labels=names))
            fam.add_metric([labels[n] for n in names], value * scale)
        yield from fams.values()
