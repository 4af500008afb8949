"""Business-metric check config: checks declared by name under ``checks.business.checks``.

A check aggregates one event field over a window and compares it either with the same aggregate over a
baseline window (``compare: relative``, the change as a fraction) or with a fixed number
(``compare: absolute``).
"""

from __future__ import annotations

import re
from typing import Literal

from pydantic import Field, field_validator, model_validator

from sidecar.configbase import StrictModel

__all__ = ["BusinessCheckConfig", "BusinessConfig", "parse_field_ref"]

_FIELD_RE = re.compile(r"^(score|label|count|(fields|features)\.[A-Za-z0-9_.:\-]+)$")
_NAME_RE = re.compile(r"^[a-z][a-z0-9_]{0,63}$")


def parse_field_ref(ref: str) -> tuple[str, str]:
    """``fields.wer`` -> ("fields", "wer"); ``score`` -> ("score", ""). Raises ValueError on anything else."""
    if not _FIELD_RE.match(ref):
        raise ValueError(f"unknown event field {ref!r}: use score, label, count, fields.<name> or features.<name>")
    head, _, tail = ref.partition(".")
    return head, tail


class BusinessCheckConfig(StrictModel):
    field: str = Field(
        description="Event field aggregated: score, label, count (1 per event), fields.<name> or features.<name>."
    )
    aggregate: Literal["mean", "quantile", "rate", "ratio"] = Field(
        default="mean",
        description="mean of the field; quantile (see `quantile`); rate = sum of the field per second; "
        "ratio = sum of the field / sum of `denominator`.",
    )
    quantile: float | None = Field(
        default=None, gt=0, lt=1, description="Quantile for aggregate=quantile (0.95 = p95)."
    )
    denominator: str | None = Field(
        default=None, description="Event field summed as the denominator of aggregate=ratio."
    )
    display_name: str = Field(
        default="", description="Human name in alert summaries (e.g. 'CTR mean'); defaults to the name."
    )
    model: str | None = Field(default=None, description="Only events of this model (default: every model).")
    group_by: list[Literal["model", "version"]] = Field(
        default=["model"], description="Series keys; the baseline is kept per series."
    )
    window_secs: float = Field(default=3600.0, gt=0, description="The current window the aggregate is taken over.")
    bucket_secs: float = Field(default=60.0, gt=0, description="Resolution of the current window.")
    baseline_secs: float | None = Field(
        default=None,
        gt=0,
        description="Baseline window ending where the current window starts (compare=relative).",
    )
    baseline_bucket_secs: float = Field(default=3600.0, gt=0, description="Resolution of the baseline window.")
    compare: Literal["relative", "absolute"] = Field(
        default="absolute",
        description="relative: (value - baseline) / |baseline| vs threshold; absolute: value vs threshold.",
    )
    direction: Literal["up", "down"] = Field(
        default="up",
        description="up: fires when the value (or change) is above the threshold; down: when it is below.",
    )
    threshold: float = Field(
        description="absolute: the value limit; relative: the change as a positive fraction (0.15 = 15%)."
    )
    for_secs: float = Field(default=0.0, ge=0, description="How long the condition must hold before the alert fires.")
    severity: Literal["info", "low", "warning", "high", "critical"] = Field(
        default="warning", description="Alert severity."
    )
    team: str = Field(default="", description="Team label for Alertmanager routing (empty: no team label).")
    min_events: int = Field(default=30, ge=1, description="Fewer events in the current window: insufficient data.")
    min_baseline_events: int = Field(default=100, ge=1, description="Fewer events in the baseline: insufficient data.")
    min_baseline_coverage: float = Field(
        default=0.5,
        ge=0,
        le=1,
        description="Share of the baseline window that must hold data, else insufficient data.",
    )
    max_series: int = Field(default=100, gt=0, description="Series this check tracks; new ones above it are refused.")
    runbook: str = Field(
        default="business-metric.md", description="Runbook page (relative to runbook_url) for the alert."
    )

    @field_validator("field", "denominator")
    @classmethod
    def _known_field(cls, v: str | None) -> str | None:
        if v is not None:
            parse_field_ref(v)
        return v

    @model_validator(mode="after")
    def _consistent(self) -> BusinessCheckConfig:
        if self.aggregate == "quantile" and self.quantile is None:
            raise ValueError("quantile: required when aggregate is quantile")
        if self.aggregate == "ratio" and self.denominator is None:
            raise ValueError("denominator: required when aggregate is ratio")
        if self.compare == "relative":
            if self.baseline_secs is None:
                raise ValueError("baseline_secs: required when compare is relative")
            if self.threshold <= 0:
                raise ValueError("threshold: must be a positive fraction when compare is relative")
        if self.bucket_secs > self.window_secs:
            raise ValueError("bucket_secs: must not exceed window_secs")
        if self.window_secs / self.bucket_secs > 10_080:
            raise ValueError("bucket_secs: window_secs / bucket_secs must be at most 10080 (bounded memory)")
        if self.baseline_secs is not None and self.baseline_secs / self.baseline_bucket_secs > 10_080:
            raise ValueError("baseline_bucket_secs: baseline_secs / baseline_bucket_secs must be at most 10080")
        return self


class BusinessConfig(StrictModel):
    enabled: bool = Field(default=False, description="Run the business-metric checks declared under `checks`.")
    checks: dict[str, BusinessCheckConfig] = Field(
        default_factory=dict,
        description="Checks by name (lowercase, digits, underscores); the name is the alert's.",
    )
    max_future_skew_secs: float = Field(
        default=300.0,
        ge=0,
        description="Events stamped further in the future than this are dropped (counted).",
    )

    @field_validator("checks")
    @classmethod
    def _names(cls, v: dict[str, BusinessCheckConfig]) -> dict[str, BusinessCheckConfig]:
        for name in v:
            if not _NAME_RE.match(name):
                raise ValueError(f"check name {name!r} must match {_NAME_RE.pattern}")
        return v
