"""Config of the batching advisor."""

from __future__ import annotations

from pydantic import Field

from sidecar.configbase import StrictModel

__all__ = ["BatchingConfig"]


class BatchingConfig(StrictModel):
    enabled: bool = Field(False, description="Advise on dynamic batching from queue time, batch fill and rate.")
    window_secs: float = Field(300.0, gt=0, description="Window of counter increases the advice is computed over.")
    min_requests: int = Field(100, gt=0, description="Requests in the window below which no advice is given.")
    max_suggested_delay_us: int = Field(
        10_000,
        gt=0,
        description="The longest max_queue_delay_microseconds the advisor suggests (the latency "
        "you accept to wait for a batch).",
    )
    config_refresh_secs: float = Field(
        300.0, gt=0, description="How often a model's config (GET /v2/models/{m}/config) is read again."
    )
