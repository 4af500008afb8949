"""The config of the failure join (``traces.failure_join``, the component is ``triton_failures.py``)."""

from __future__ import annotations

from pydantic import Field

from sidecar.configbase import StrictModel

__all__ = ["FailureJoinConfig"]


class FailureJoinConfig(StrictModel):
    metrics_url: str | None = Field(
        default=None,
        description="Triton's /metrics URL; when set, increases of nv_inference_request_failure per model "
        "and version mark the traces of that model and version in the same interval (see docs/traces.md).",
    )
    interval_secs: float = Field(default=15.0, gt=0, description="How often Triton's failure counters are read.")
