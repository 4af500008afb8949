"""Config of the Triton metrics source."""

from __future__ import annotations

from pydantic import Field

from sidecar.configbase import StrictModel

__all__ = ["TritonConfig"]


class TritonConfig(StrictModel):
    enabled: bool = Field(True, description="Scrape a Triton metrics endpoint.")
    metrics_url: str = Field("http://127.0.0.1:8002/metrics", description="Triton's Prometheus endpoint.")
    http_url: str | None = Field(
        "http://127.0.0.1:8000",
        description="Triton's HTTP endpoint, polled for the repository index (model versions loaded or unloaded). "
        "null turns that off.",
    )
    interval_secs: float = Field(5.0, gt=0, description="Seconds between scrapes.")
    timeout_secs: float = Field(3.0, gt=0, description="A scrape taking longer than this fails (counted).")
    max_series: int = Field(
        20_000, gt=0, description="Series one scrape may hold; a scrape above it is refused and counted."
    )
    max_models: int = Field(
        500, gt=0, description="Model/version pairs tracked; new pairs above it are refused and counted."
    )
    ratio_window_secs: float = Field(
        60.0,
        gt=0,
        description="Window over which the error ratio, inferences per execution and cache hit ratio "
        "are computed (sum of counter increases of the scrape intervals that ended within it).",
    )
    stale_after_secs: float = Field(
        30.0, gt=0, description="Derived series older than this are no longer exported as fresh."
    )
