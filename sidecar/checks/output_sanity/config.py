"""Config of the output sanity check (``checks.output_sanity``): what a model's live outputs must never look like."""

from __future__ import annotations

from typing import Literal

from pydantic import Field, field_validator, model_validator

from sidecar.configbase import StrictModel

__all__ = ["ModelOutputsConfig", "OutputRange", "OutputSanityConfig"]


class OutputRange(StrictModel):
    min: float | None = Field(None, description="Lowest valid output value (inclusive).")
    max: float | None = Field(None, description="Highest valid output value (inclusive).")

    @model_validator(mode="after")
    def _check(self) -> OutputRange:
        if self.min is None and self.max is None:
            raise ValueError("min or max: at least one is required")
        if self.min is not None and self.max is not None and self.min > self.max:
            raise ValueError("max: must not be below min")
        return self


class ModelOutputsConfig(StrictModel):
    outputs: list[str] = Field(
        default_factory=lambda: ["score"],
        min_length=1,
        max_length=64,
        description="Which event values are this model's outputs: `score`, `features.<name>` (e.g. an output "
        "tensor's columns mapped as features by `events.triton_trace`, where NaN stays NaN) or "
        "`fields.<name>`.",
    )
    range: OutputRange | None = Field(
        None, description="Declared range of every output (e.g. {min: 0, max: 1} for a probability)."
    )

    @field_validator("outputs")
    @classmethod
    def _names(cls, v: list[str]) -> list[str]:
        for name in v:
            head, _, key = name.partition(".")
            if name != "score" and (head not in ("features", "fields") or not key):
                raise ValueError(f"{name!r}: must be 'score', 'features.<name>' or 'fields.<name>'")
        return v


class OutputSanityConfig(StrictModel):
    enabled: bool = Field(
        False,
        description="Watch live outputs for NaN/inf, all zeros, out-of-range values and a collapsed distribution.",
    )
    window_secs: float = Field(300.0, gt=0, le=86400, description="Each test looks at this trailing window.")
    bucket_count: int = Field(10, ge=1, le=1000, description="Time buckets the window is kept in.")
    models: dict[str, ModelOutputsConfig] = Field(
        default_factory=dict,
        description="Per model: its outputs and their declared range. A model not listed "
        "is checked on `score` with no range.",
    )
    min_samples: int = Field(
        100,
        ge=1,
        le=1_000_000,
        description="The all-zero and collapsed tests decide only with this many "
        "outputs in the window (one NaN or out-of-range value is enough).",
    )
    nonfinite_max_ratio: float = Field(
        0.0, ge=0, lt=1, description="NaN/inf: fires above this share of outputs (0: any)."
    )
    zero_max_ratio: float = Field(0.5, ge=0, lt=1, description="All-zero outputs: fires above this share.")
    out_of_range_max_ratio: float = Field(0.0, ge=0, lt=1, description="Out of range: fires above this share (0: any).")
    collapsed_ratio: float = Field(
        0.95, gt=0, lt=1, description="Collapsed: fires when one value makes more than this share of the window."
    )
    max_distinct_values: int = Field(
        1000,
        ge=10,
        le=100_000,
        description="Distinct values counted per bucket for the collapse test (the rest "
        "are counted together: a value that dominates is seen early).",
    )
    sample_ids: int = Field(5, ge=1, le=50, description="Trace or request ids kept as examples per finding.")
    max_models: int = Field(200, gt=0, le=10_000, description="Models watched (more are dropped, counted).")
    max_versions_per_model: int = Field(8, gt=0, le=64, description="Versions watched per model.")
    severity: Literal["info", "warning", "critical"] = Field("critical", description="Severity of the alerts.")
    for_secs: float = Field(60.0, ge=0, description="How long a condition holds before its alert fires.")
