"""Config of the poller of Triton's model API (repository index, statistics, model configs) the verdicts read."""

from __future__ import annotations

from pydantic import Field

from sidecar.configbase import StrictModel

__all__ = ["ModelApiConfig"]


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
