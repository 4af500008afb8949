"""Groups one Triton scrape by model and version: the counters, failures, pending gauge and summaries of each.

A version is *present* only while Triton serves it, which its exposition shows by the success or inference
counter: Triton 2.51 keeps exporting the four zero-valued ``nv_inference_request_failure`` series of a version
unloaded in explicit mode, and those alone must not make a model.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Protocol

__all__ = ["PASSTHROUGH", "STAGES", "Key", "ModelSnapshot", "snapshot_models"]

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
_PRESENCE = ("nv_inference_request_success", "nv_inference_count")
_PENDING = "nv_inference_pending_request_count"

# Server-level Triton gauges and counters re-exported under the sidecar's names, in base units.
PASSTHROUGH: dict[str, tuple[str, str, float, str]] = {
    # triton name: (our name, type, scale, help)
    "nv_gpu_utilization": ("sidecar_triton_gpu_utilization_ratio", "gauge", 1.0, "GPU utilization (0..1)."),
    "nv_gpu_memory_total_bytes": ("sidecar_triton_gpu_memory_total_bytes", "gauge", 1.0, "GPU memory total."),
    "nv_gpu_memory_used_bytes": ("sidecar_triton_gpu_memory_used_bytes", "gauge", 1.0, "GPU memory used."),
    "nv_gpu_power_usage": ("sidecar_triton_gpu_power_usage_watts", "gauge", 1.0, "GPU power draw."),
    "nv_gpu_power_limit": ("sidecar_triton_gpu_power_limit_watts", "gauge", 1.0, "GPU power limit."),
    "nv_energy_consumption": (
        "sidecar_triton_gpu_energy_consumption_joules",
        "counter",
        1.0,
        "GPU energy since Triton started.",
    ),
    "nv_cpu_utilization": ("sidecar_triton_cpu_utilization_ratio", "gauge", 1.0, "Host CPU utilization (0..1)."),
    "nv_cpu_memory_total_bytes": ("sidecar_triton_cpu_memory_total_bytes", "gauge", 1.0, "Host memory total."),
    "nv_cpu_memory_used_bytes": ("sidecar_triton_cpu_memory_used_bytes", "gauge", 1.0, "Host memory used."),
    "nv_pinned_memory_pool_total_bytes": (
        "sidecar_triton_pinned_memory_pool_total_bytes",
        "gauge",
        1.0,
        "Pinned memory pool size.",
    ),
    "nv_pinned_memory_pool_used_bytes": (
        "sidecar_triton_pinned_memory_pool_used_bytes",
        "gauge",
        1.0,
        "Pinned memory pool in use.",
    ),
}

Key = tuple[str, str]  # (model, version)


@dataclass
class ModelSnapshot:
    counters: dict[str, float] = field(default_factory=dict)
    failures: dict[str, float] = field(default_factory=dict)
    pending: float | None = None
    quantiles: dict[tuple[str, str], float] = field(default_factory=dict)  # (stage, quantile) -> seconds
    summary_totals: dict[str, tuple[float, float]] = field(default_factory=dict)  # stage -> (count, sum seconds)


class Scrape(Protocol):
    """What grouping needs of one scrape: a parsed exposition, or its published ``SeriesSnapshot``."""

    @property
    def samples(self) -> Sequence[tuple[str, str, float]]: ...

    def labels(self, raw: str) -> Mapping[str, str]: ...


def snapshot_models(
    expo: Scrape, max_models: int
) -> tuple[dict[Key, ModelSnapshot], list[tuple[str, dict[str, str], float]], int]:
    """Group one scrape by model/version; returns (models, server-level passthrough samples, models refused)."""
    models: dict[Key, ModelSnapshot] = {}
    passthrough: list[tuple[str, dict[str, str], float]] = []
    refused: set[Key] = set()
    labels_of = expo.labels
    counters, summaries = _COUNTERS, _SUMMARIES
    for name, raw, value in expo.samples:
        if not name.startswith("nv_inference_") and name not in counters:
            if name in PASSTHROUGH:
                passthrough.append((name, dict(labels_of(raw)), value))
            continue
        lab = labels_of(raw)
        model = lab.get("model")
        if model is None:
            continue
        key = (model, lab.get("version", ""))
        snap = models.get(key)
        if snap is None:
            if len(models) >= max_models:
                # Only a version Triton serves is refused; leftover failure series of an unloaded one are not.
                if name in _PRESENCE:
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
    # Leftover series of an unloaded version (failures, at zero) do not make it present.
    gone = [key for key, s in models.items() if "success" not in s.counters and "inferences" not in s.counters]
    for key in gone:
        del models[key]
    return models, passthrough, len(refused)
