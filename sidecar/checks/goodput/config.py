"""Config of the goodput check (``checks.goodput``): per-model SLO thresholds, the objective and the burn-rate
window pairs."""

from __future__ import annotations

from typing import Literal

from pydantic import Field, model_validator

from sidecar.configbase import StrictModel

__all__ = ["GoodputBurnWindow", "GoodputConfig", "RequestSlo"]


class RequestSlo(StrictModel):
    """What one request must meet to count as good; an unset bound is not judged (at least one is set)."""

    ttft_ms: float | None = Field(None, gt=0, description="Time to first token at or below this (event field ttft_ms).")
    inter_token_ms: float | None = Field(
        None,
        gt=0,
        description="Mean inter-token latency at or below this (field inter_token_ms, else tpot_ms, else "
        "(latency_ms - ttft_ms) / (tokens_out - 1)).",
    )
    e2e_ms: float | None = Field(None, gt=0, description="Whole-request latency at or below this (field latency_ms).")

    @model_validator(mode="after")
    def _some(self) -> RequestSlo:
        if self.ttft_ms is None and self.inter_token_ms is None and self.e2e_ms is None:
            raise ValueError("ttft_ms, inter_token_ms or e2e_ms: one is required")
        return self


class GoodputBurnWindow(StrictModel):
    long_secs: float = Field(..., ge=60, le=7 * 86_400, description="The long window of the pair.")
    short_secs: float = Field(..., ge=60, le=86_400, description="The short window (usually long / 12).")
    factor: float = Field(..., gt=0, description="Burn rate both windows must exceed (1: the budget lasts exactly).")
    severity: Literal["critical", "warning", "info"] = Field("warning", description="Severity when this pair fires.")

    @model_validator(mode="after")
    def _order(self) -> GoodputBurnWindow:
        if self.short_secs >= self.long_secs:
            raise ValueError("short_secs: must be shorter than long_secs")
        return self


class GoodputConfig(StrictModel):
    enabled: bool = Field(False, description="Count requests meeting every SLO (goodput) from events' fields.")
    slos: dict[str, RequestSlo] = Field(
        default_factory=lambda: {"*": RequestSlo(ttft_ms=500.0, inter_token_ms=50.0)},
        min_length=1,
        max_length=256,
        description="SLO per model name (`*`: any model not named). A model with none is not judged (counted).",
    )
    objective: float = Field(0.99, gt=0, lt=1, description="Share of good requests the SLO promises.")
    burn_windows: list[GoodputBurnWindow] = Field(
        default_factory=lambda: [
            GoodputBurnWindow(long_secs=3600, short_secs=300, factor=14.4, severity="critical"),
            GoodputBurnWindow(long_secs=6 * 3600, short_secs=1800, factor=6, severity="warning"),
        ],
        min_length=1,
        max_length=8,
        description="Multi-window burn-rate alerts, first match wins. Burn rate = bad share / (1 - objective).",
    )
    span_names: list[str] = Field(
        default_factory=lambda: ["llm_request"],
        max_length=16,
        description="Spans of these names are judged like events, from their gen_ai.latency.time_to_first_token, "
        "gen_ai.latency.e2e (seconds) and gen_ai.usage.completion_tokens attributes (vLLM's llm_request span); "
        "empty: spans are not read.",
    )
    bucket_secs: float = Field(
        60.0,
        ge=1,
        le=3600,
        description="Width of the time buckets good/total are kept in. A window counts every bucket it overlaps "
        "(the current, partial one included): it covers its length and at most one bucket more. No window may be "
        "shorter than a bucket.",
    )
    min_requests: int = Field(20, ge=1, description="Fewer requests in either window of a pair: no decision.")
    max_series: int = Field(
        1000, gt=0, le=100_000, description="(model, version) series kept; more are refused and counted."
    )

    @model_validator(mode="after")
    def _buckets(self) -> GoodputConfig:
        longest = max(w.long_secs for w in self.burn_windows)
        if longest / self.bucket_secs > 20_000:
            raise ValueError("bucket_secs: too small for the longest burn window (over 20000 buckets)")
        for i, w in enumerate(self.burn_windows):
            # A window narrower than a bucket would be judged on one or two buckets' worth of requests.
            if w.short_secs < self.bucket_secs:
                raise ValueError(
                    f"burn_windows.{i}.short_secs: {w.short_secs:g} is shorter than bucket_secs {self.bucket_secs:g}"
                )
        return self
