"""Config of the edge checks (``edge.checks``): the hit-ratio SLA, the latency tail and the purge watch."""

from __future__ import annotations

from typing import Literal

from pydantic import Field, model_validator

from sidecar.configbase import StrictModel

__all__ = ["BurnWindow", "EdgeChecksConfig", "HitRatioSlaConfig", "PurgeWatchConfig", "TailConfig"]


class BurnWindow(StrictModel):
    long_secs: float = Field(..., ge=60, le=7 * 86_400, description="The long window of the pair.")
    short_secs: float = Field(..., ge=60, le=86_400, description="The short window (usually long / 12).")
    factor: float = Field(
        ..., gt=0, description="Burn rate both windows must exceed (1: the budget ends with the period)."
    )
    severity: Literal["critical", "warning", "info"] = Field("warning", description="Severity when this pair fires.")

    @model_validator(mode="after")
    def _order(self) -> BurnWindow:
        if self.short_secs >= self.long_secs:
            raise ValueError("short_secs: must be shorter than long_secs")
        return self


class HitRatioSlaConfig(StrictModel):
    enabled: bool = Field(True, description="Hold route groups to a cache hit-ratio SLA.")
    target: float = Field(0.92, gt=0, lt=1, description="Hit ratio the period must end at or above.")
    period: Literal["day", "week"] = Field("day", description="The SLA period: a UTC calendar day or ISO week.")
    groups: list[str] = Field(
        default_factory=lambda: ["all"],
        min_length=1,
        max_length=64,
        description="Route groups held to the SLA (`all`: every request; `*`: each group seen).",
    )
    burn_windows: list[BurnWindow] = Field(
        default_factory=lambda: [
            BurnWindow(long_secs=3600, short_secs=300, factor=6, severity="critical"),
            BurnWindow(long_secs=6 * 3600, short_secs=1800, factor=2, severity="warning"),
        ],
        max_length=8,
        description="Multi-window burn-rate alerts, first match wins. Burn rate = miss ratio / (1 - target).",
    )
    projection_secs: float = Field(
        3600.0, ge=300, le=86_400, description="The recent traffic the end-of-period projection extrapolates."
    )
    min_requests: int = Field(100, ge=1, description="Fewer requests in a window: no decision (insufficient data).")


class TailConfig(StrictModel):
    enabled: bool = Field(True, description="Watch p99.9 of a hop's latency, whatever p99 does.")
    groups: list[str] = Field(default_factory=lambda: ["all"], min_length=1, max_length=64, description="Groups.")
    hop: Literal["edge", "origin"] = Field("edge", description="Which latency: the edge's whole request or origin.")
    window_secs: float = Field(300.0, ge=60, le=86_400, description="The window p99.9 is taken over (whole minutes).")
    baseline_secs: float = Field(3600.0, ge=60, le=86_400, description="The window before it, for the ratio.")
    threshold_secs: float | None = Field(None, gt=0, description="p99.9 above this fires (unset: ratio only).")
    max_ratio: float | None = Field(2.0, gt=1, description="p99.9 above this times the baseline's fires.")
    min_requests: int = Field(1000, ge=100, description="Requests a window needs (p99.9 of fewer says little).")
    severity: Literal["critical", "warning", "info"] = Field("warning", description="Severity of the finding.")

    @model_validator(mode="after")
    def _some(self) -> TailConfig:
        if self.enabled and self.threshold_secs is None and self.max_ratio is None:
            raise ValueError("threshold_secs or max_ratio: one is required")
        return self


class PurgeWatchConfig(StrictModel):
    enabled: bool = Field(True, description="Treat purges (changes `cache purge <scope> <pattern>`) as checks.")
    grace_secs: float = Field(10.0, ge=0, le=3600, description="Hits this soon after a purge are not counted.")
    watch_secs: float = Field(86_400.0, ge=60, le=7 * 86_400, description="How long a purge is watched.")
    min_hits: int = Field(1, ge=1, description="Hits on covered paths after a purge that make it a finding.")
    max_purges: int = Field(200, gt=0, le=10_000, description="Purges watched at once (oldest dropped, counted).")
    max_paths: int = Field(
        20_000, gt=0, le=1_000_000, description="Distinct paths remembered to tell a purge that matched nothing."
    )
    max_paths_per_purge: int = Field(100, gt=0, le=10_000, description="Paths counted per purge (more: `other`).")


class EdgeChecksConfig(StrictModel):
    sla: HitRatioSlaConfig = Field(default_factory=HitRatioSlaConfig, description="The hit-ratio SLA.")
    tail: TailConfig = Field(default_factory=TailConfig, description="The p99.9 tail check.")
    purges: PurgeWatchConfig = Field(default_factory=PurgeWatchConfig, description="Purges that did not take.")
