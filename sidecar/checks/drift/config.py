"""Config of the drift check (``checks.drift``)."""

from __future__ import annotations

from typing import Literal

from pydantic import Field, model_validator

from sidecar.configbase import StrictModel

__all__ = ["DriftConfig", "ModelDriftConfig", "ReferenceConfig"]


class ReferenceConfig(StrictModel):
    mode: Literal["pinned", "file", "rolling"] = Field(
        "pinned",
        description="Where the reference comes from: 'pinned' (the first `pinned_events` events of a "
        "version), "
        "'file' (Parquet, CSV or JSONL at `path`, e.g. a training-set sample) or 'rolling' "
        "(the same hours one week earlier).",
    )
    path: str | None = Field(None, description="Reference file for mode 'file' (.parquet, .csv or .jsonl).")
    pinned_events: int = Field(
        5000,
        gt=0,
        le=10_000_000,
        description="Mode 'pinned': how many events after a version is first seen make its reference.",
    )
    pinned_version: str | None = Field(
        None,
        description="Mode 'pinned': pin every version to this version's first events (default: each "
        "version is compared with its own first events).",
    )
    rolling_offset_secs: float = Field(
        7 * 86400.0,
        gt=0,
        description="Mode 'rolling': how far back the reference window lies (a week).",
    )

    @model_validator(mode="after")
    def _check(self) -> ReferenceConfig:
        if self.mode == "file" and not self.path:
            raise ValueError("path: required when mode is 'file'")
        return self


class ModelDriftConfig(StrictModel):
    features: dict[str, Literal["numeric", "categorical"]] = Field(
        default_factory=dict,
        description="Declared feature kinds. Undeclared features are inferred on first sight (a number -> "
        "numeric, a string -> categorical) and then fixed, unless `infer_features` is false.",
    )
    reference: ReferenceConfig | None = Field(
        None, description="This model's reference (default: `checks.drift.reference`)."
    )


class DriftConfig(StrictModel):
    enabled: bool = Field(False, description="Run the drift check on events from the events sources.")
    method: Literal["multiscale", "window"] = Field(
        "multiscale",
        description="'multiscale': every feature is tested on non-overlapping blocks of each of `scales_secs`, "
        "a finding is active once `sustained_looks` of the last `sustained_of` blocks of one scale "
        "drift, and the per-look level is derived from `false_alarms_per_day` (docs/drift.md). "
        "'window' (the former method): one sliding `window_secs` window, `p_threshold` and "
        "`sustained_secs` of wall time.",
    )
    scales_secs: list[float] = Field(
        default_factory=lambda: [60.0, 300.0, 1800.0],
        description="Method 'multiscale': block lengths tested together, ascending, each a multiple of the "
        "first (1 to 6 of them).",
    )
    sustained_looks: int = Field(
        2,
        ge=1,
        le=10,
        description="Method 'multiscale': drifting blocks needed among the last `sustained_of` of one scale.",
    )
    sustained_of: int = Field(
        3,
        ge=1,
        le=10,
        description="Method 'multiscale': how many of a scale's latest blocks `sustained_looks` counts in.",
    )
    false_alarms_per_day: float = Field(
        1 / 30,
        gt=0,
        le=24,
        description="Method 'multiscale': the false-alarm budget of one model/version "
        "(expected false alarms per day under no drift), spent equally "
        "across the scales; it sets each scale's per-look level, never above "
        "`p_threshold`.",
    )
    window_secs: float = Field(
        1800.0, gt=0, description="Method 'window': length of the current window compared with the reference."
    )
    bucket_count: int = Field(
        6,
        ge=1,
        le=1000,
        description="Method 'window': time buckets the current window is split into (it slides one bucket at a time).",
    )
    min_samples: int = Field(
        200,
        ge=1,
        description="Fewer non-missing values than this in the current "
        "window or the reference gives an insufficient-data "
        "finding.",
    )
    p_threshold: float = Field(
        0.01, gt=0, lt=1, description="Benjamini-Hochberg-adjusted p-value below which a feature may drift."
    )
    ks_effect_floor: float = Field(
        0.05, ge=0, le=1, description="Smallest KS D (numeric) that counts as drift, whatever the p-value."
    )
    psi_effect_floor: float = Field(0.1, ge=0, description="Smallest PSI (categorical) that counts as drift.")
    missing_ratio_increase: float = Field(
        0.1,
        gt=0,
        le=1,
        description="A rise of the missing/NaN ratio over the reference's by this much is "
        "reported as a missing-values finding (test='missing').",
    )
    sustained_secs: float = Field(
        600.0,
        ge=0,
        description="Method 'window': the drift condition must hold "
        "this long before a finding is active (decided in "
        "the check).",
    )
    max_exact_samples: int = Field(
        20_000,
        ge=100,
        description="Raw values kept per feature per current window; beyond it buckets fold "
        "into KLL sketches (bounded memory, error in docs/drift.md).",
    )
    kll_k: int = Field(
        400,
        ge=8,
        le=65535,
        description="KLL sketch size parameter (float32 items; rank error ~0.68% at 400, "
        "~5 KB per sketch of 1M values).",
    )
    max_reference_samples: int = Field(
        200_000, ge=100, description="Largest numeric reference kept per feature (files are subsampled, seeded)."
    )
    max_series: int = Field(
        1000, gt=0, description="Most model/version/feature series; new ones are refused and counted."
    )
    max_categories: int = Field(
        100, ge=2, description="Categories tracked per categorical feature; the rest are counted under __other__."
    )
    max_series_per_model: int = Field(
        500,
        gt=0,
        description="Most feature series one model/version may hold, so one model's junk feature "
        "names cannot take every series slot; refusals are counted (reason "
        "'model_series_limit').",
    )
    max_models: int = Field(
        50, gt=0, description="Most model/version pairs tracked. Models named under `models` always get a slot."
    )
    series_idle_secs: float = Field(
        86400.0,
        gt=0,
        description="A series with no event for this long is dropped (window, history, "
        "gauges, stored rows) and a model/version left with no series frees its "
        "slot. Never less than `window_secs`, nor, for a rolling reference, than "
        "`rolling_offset_secs` + `window_secs`.",
    )
    infer_features: bool = Field(True, description="Infer undeclared features' kinds on first sight.")
    monitor_score: bool = Field(
        True, description="Also test the prediction score (feature '_score') and predicted class (feature '_class')."
    )
    eval_threads: int = Field(
        2,
        ge=1,
        le=64,
        description="Threads one evaluation spreads the numeric features over (numpy's sort "
        "and search release the GIL); 1 evaluates them one after another.",
    )
    persist_interval_secs: float = Field(60.0, gt=0, description="How often windows are saved to the store.")
    reference: ReferenceConfig = Field(
        default_factory=ReferenceConfig, description="Default reference for every model."
    )
    models: dict[str, ModelDriftConfig] = Field(
        default_factory=dict, description="Per-model feature kinds and references."
    )

    @property
    def longest_secs(self) -> float:
        """The longest span of current data a test looks at (the window, or the largest block)."""
        return self.scales_secs[-1] if self.method == "multiscale" else self.window_secs

    @model_validator(mode="after")
    def _check(self) -> DriftConfig:
        if self.max_exact_samples < self.bucket_count:
            raise ValueError("max_exact_samples: must be at least bucket_count")
        sc = self.scales_secs
        if not 1 <= len(sc) <= 6:
            raise ValueError("scales_secs: give 1 to 6 block lengths")
        if any(s <= 0 for s in sc) or sorted(set(sc)) != sc:
            raise ValueError("scales_secs: block lengths must be positive, distinct and ascending")
        if any(abs(s / sc[0] - round(s / sc[0])) > 1e-9 for s in sc):
            raise ValueError("scales_secs: every block length must be a multiple of the first")
        if round(sc[-1] / sc[0]) + 1 > 1000:
            raise ValueError("scales_secs: the largest may be at most 999 times the smallest")
        if self.sustained_looks > self.sustained_of:
            raise ValueError("sustained_looks: must be at most sustained_of")
        return self
