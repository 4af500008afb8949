"""Config of the canary verdict (``checks.canary``): two versions of a model compared while both serve."""

from __future__ import annotations

from typing import Literal

from pydantic import Field, model_validator

from sidecar.configbase import StrictModel

__all__ = ["CanaryConfig", "CanaryPair"]


class CanaryPair(StrictModel):
    baseline: str = Field(description="The version serving today (the one to revert to).")
    candidate: str = Field(description="The version being rolled out.")

    @model_validator(mode="after")
    def _check(self) -> CanaryPair:
        if self.baseline == self.candidate:
            raise ValueError("candidate: must differ from baseline")
        return self


class CanaryConfig(StrictModel):
    enabled: bool = Field(False, description="Compare the versions of each model that serve side by side.")
    window_secs: float = Field(
        600.0, gt=0, le=86400, description="Both versions are compared over this trailing window."
    )
    min_samples: int = Field(
        200,
        ge=20,
        le=1_000_000,
        description="Fewer values than this on either side of an aspect: that aspect "
        "is not decided (insufficient data).",
    )
    min_tail_samples: int = Field(
        5,
        ge=1,
        le=1000,
        description="A latency quantile is decided only with this many values above it on each "
        "side (5: p99 needs 500 values per version).",
    )
    max_samples: int = Field(
        2000,
        ge=100,
        le=100_000,
        description="Values kept per version and aspect (the newest; older ones "
        "leave first). Memory: 16 bytes x 4 signals each, and as many Triton "
        "scrape intervals (about 400 bytes each).",
    )
    alpha: float = Field(
        0.01,
        gt=0,
        lt=0.5,
        description="False discovery rate across the aspects of one pair (Benjamini-"
        "Hochberg): an aspect is worse when its q-value is below this.",
    )
    min_relative_diff: float = Field(
        0.10,
        ge=0,
        le=10,
        description="Latency floor: p50 or p99 of the candidate must exceed the baseline's "
        "by at least this fraction (0.10 = 10%) to be called worse.",
    )
    min_error_ratio_diff: float = Field(
        0.01,
        ge=0,
        le=1,
        description="Error floor: the candidate's error ratio must exceed the baseline's by "
        "at least this much (absolute, 0.01 = one point).",
    )
    min_ks_d: float = Field(
        0.10,
        gt=0,
        le=1,
        description="Score floor: the KS distance between the versions' scores must reach this to call them different.",
    )
    latency_field: str = Field(
        "latency_ms",
        min_length=1,
        description="Event field (`fields.<name>`) holding the request latency in milliseconds.",
    )
    error_field: str = Field(
        "error",
        min_length=1,
        description="Event field (`fields.<name>`): non-zero when the request failed.",
    )
    spans: bool = Field(
        True,
        description="Also take latency and errors from model spans (Triton's span named after the model); "
        "a pair uses span latency when both sides have `min_samples` of it, else event "
        "latency, never both at once.",
    )
    triton: bool = Field(
        True,
        description="Also compare the versions on Triton's own counters (mean latency, error ratio) and, "
        "where `--metrics-config summary_latencies=true`, its p50/p99 summaries, from the "
        "Triton scrape (needs `triton.enabled`).",
    )
    min_intervals: int = Field(
        10,
        ge=5,
        le=10_000,
        description="Triton aspects: scrape intervals (summary readings for p50/p99) both "
        "versions must share before the paired test decides (with fewer the "
        "exact test cannot reach a small p-value).",
    )
    triton_summary_window_secs: float = Field(
        60.0,
        gt=0,
        le=3600,
        description="Length of Triton's summary sliding window: p50/p99 readings this far "
        "apart cover different requests, and only those are compared.",
    )
    pairs: dict[str, CanaryPair] = Field(
        default_factory=dict,
        description="Per model: which version is the baseline and which the candidate. "
        "A model not listed: the lowest version seen is the baseline and "
        "each other version is a candidate against it.",
    )
    models: list[str] | None = Field(
        None,
        max_length=1000,
        description="Only these models are compared (null: every model seen). A model left out is not tracked "
        "at all: no verdict, no finding, no slot of max_models.",
    )
    exclude_models: list[str] = Field(
        default_factory=list,
        max_length=1000,
        description="Models never compared (e.g. one whose versions are meant to differ), whatever `models` says.",
    )
    max_models: int = Field(50, gt=0, le=10_000, description="Models tracked (more are dropped, counted).")
    max_versions_per_model: int = Field(
        4, ge=2, le=64, description="Versions tracked per model (more are dropped, counted)."
    )
    alert: bool = Field(
        True,
        description="Make a worse verdict an active finding (an alert 'consider reverting to version N'); "
        "when false the verdict is only a metric and a line on the status page.",
    )
    severity: Literal["info", "warning", "critical"] = Field("warning", description="Severity of the alert.")
    for_secs: float = Field(300.0, ge=0, description="How long a worse verdict holds before the alert fires.")

    @model_validator(mode="after")
    def _selection(self) -> CanaryConfig:
        excluded = set(self.exclude_models)
        both = sorted(excluded & set(self.models or ()))
        if both:
            raise ValueError(f"exclude_models: {', '.join(both)} also listed in models")
        for model in self.pairs:
            if model in excluded:
                raise ValueError(f"pairs.{model}: the model is in exclude_models (drop the pair)")
            if self.models is not None and model not in self.models:
                raise ValueError(f"pairs.{model}: the model is not in models (add it, or drop the pair)")
        return self

    def selected(self, model: str) -> bool:
        """Whether ``model`` is compared (``models``, ``exclude_models``)."""
        return model not in self.exclude_models and (self.models is None or model in self.models)
