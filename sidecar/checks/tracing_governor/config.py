"""Config of the tracing governor."""

from __future__ import annotations

from pydantic import Field

from sidecar.configbase import StrictModel

__all__ = ["GovernorConfig"]


class GovernorConfig(StrictModel):
    enabled: bool = Field(False, description="Change Triton's trace settings at run time (mode=triton only).")
    healthy_rate: int = Field(
        1000, gt=0, description="trace_rate (one request in N traced) while no finding is active for a model."
    )
    boosted_rate: int = Field(
        10, gt=0, description="trace_rate for a model while a drift, canary or latency finding is active."
    )
    tensors: bool = Field(True, description="Switch TENSORS on (with TIMESTAMPS) for a boosted model.")
    max_boosted_models: int = Field(
        3, gt=0, description="Overhead budget: models boosted at once; further ones wait (counted)."
    )
    kinds: list[str] = Field(
        ["drift", "canary", "latency", "slo", "cold_start"], description="Finding kinds that boost a model."
    )
    interval_secs: float = Field(5.0, gt=0, description="Seconds between applying the wanted settings to Triton.")
