"""Config of the diagnoses (``diagnose:`` in the YAML file)."""

from __future__ import annotations

from pydantic import Field

from sidecar.configbase import StrictModel

__all__ = ["DiagnoseConfig"]


class DiagnoseConfig(StrictModel):
    enabled: bool = Field(True, description="Probe Triton and report diagnoses (in /readyz, on /, as findings).")
    interval_secs: float = Field(30.0, gt=0, description="Seconds between two probes of Triton's metrics.")
    timeout_secs: float = Field(3.0, gt=0, description="A probe taking longer than this fails (counted).")
    no_spans_secs: float = Field(
        600.0, gt=0, description="No span received for this long while Triton serves requests: a diagnosis."
    )
    gpu_idle_ratio: float = Field(
        0.1, ge=0, le=1, description="GPU utilization (0..1) below which a GPU counts as idle."
    )
    queue_secs: float = Field(
        0.01,
        gt=0,
        description="Mean queue time per request (seconds, over one probe interval) that counts as requests queueing.",
    )
    busy_ratio: float = Field(
        0.9,
        gt=0,
        le=1,
        description="Share of wall time one instance spends computing that counts as busy.",
    )
    max_models: int = Field(500, gt=0, description="Model/version pairs the probe keeps; more are refused and counted.")
