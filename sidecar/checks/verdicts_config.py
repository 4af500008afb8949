"""Config of the Triton verdicts: the model-API poller they read, cold-start watch, batching advisor, governor."""

from __future__ import annotations

from pydantic import Field

from sidecar.configbase import StrictModel

__all__ = ["BatchingConfig", "ColdStartConfig", "GovernorConfig", "ModelApiConfig"]


class ModelApiConfig(StrictModel):
    interval_secs: float = Field(
        2.0,
        gt=0,
        description="Seconds between polls of Triton's repository index and /v2/models/stats (the "
        "resolution of a measured load time).",
    )
    timeout_secs: float = Field(5.0, gt=0, description="A poll taking longer than this fails (counted).")
    max_models: int = Field(
        500, gt=0, description="Model/version pairs taken from one poll; the rest are refused and counted."
    )


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
