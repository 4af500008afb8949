"""Config of the cold-start verdict."""

from __future__ import annotations

from pydantic import Field

from sidecar.configbase import StrictModel

__all__ = ["ColdStartConfig"]


class ColdStartConfig(StrictModel):
    enabled: bool = Field(False, description="Watch model loads and the first requests after a version loads.")
    max_load_secs: float = Field(
        60.0,
        gt=0,
        description="A version taking longer than this from LOADING to READY is a finding (also "
        "while it is still loading).",
    )
    first_requests: int = Field(10, gt=0, description="How many requests after a load count as its first requests.")
    slowdown_factor: float = Field(
        3.0,
        gt=1,
        description="The first requests are a finding when their mean latency exceeds this many "
        "times the steady p99 (of per-poll mean latency) of the same version.",
    )
    steady_intervals: int = Field(
        30,
        ge=3,
        le=10_000,
        description="Poll intervals with traffic after the first requests that make the "
        "steady reference (also the bound of the window kept).",
    )
    hold_secs: float = Field(
        3600.0,
        gt=0,
        description="How long a cold-start finding stays active after the load or first requests it reports.",
    )
