"""GpuConfig: GPU counters from NVML (the local driver) and/or a dcgm-exporter endpoint."""

from __future__ import annotations

from pydantic import Field, ValidationInfo, field_validator

from sidecar.configbase import StrictModel

__all__ = ["DcgmConfig", "GpuConfig", "NvmlConfig"]


class NvmlConfig(StrictModel):
    enabled: bool = Field(
        default=True,
        description="Sample the local GPUs through NVML (libnvidia-ml). Without a driver or GPU the sidecar "
        "still "
        'starts and reports `sidecar_gpu_visible_devices{source="nvml"} 0`.',
    )
    interval_secs: float = Field(default=10.0, gt=0, description="Seconds between NVML samples.")
    init_retry_secs: float = Field(
        default=300.0,
        gt=0,
        description="While NVML cannot be initialised (no driver, no GPU), how often initialisation is tried again.",
    )
    max_gpus: int = Field(
        default=16, gt=0, description="GPUs sampled at most; devices above it are skipped and counted."
    )
    xid_events: bool = Field(
        default=True, description="Register for NVML XID critical-error events and count them per GPU."
    )
    max_events_per_sample: int = Field(
        default=256,
        gt=0,
        description="NVML events drained per sample at most; the rest wait for the next sample.",
    )
    processes: bool = Field(
        default=True,
        description="Export the GPU memory each compute process holds, and join each process to its "
        "/proc/PID/cmdline for the per-model `process` figures (both need Triton's PID namespace: docs/gpu.md).",
    )
    max_processes_per_gpu: int = Field(
        default=32,
        gt=0,
        description="Processes exported per GPU (largest first); the rest still count in the owner totals.",
    )
    triton_process_names: tuple[str, ...] = Field(
        default=("tritonserver", "triton_python_"),
        description="Prefixes of process names (/proc/PID/comm, 15 characters at most) counted as "
        "Triton's own "
        'GPU memory (`owner="triton"`); the Python backend stub shows as `triton_python_b`.',
    )


class DcgmConfig(StrictModel):
    enabled: bool = Field(default=False, description="Scrape a dcgm-exporter endpoint.")
    url: str = Field(default="http://127.0.0.1:9400/metrics", description="dcgm-exporter's Prometheus endpoint.")
    interval_secs: float = Field(default=15.0, gt=0, description="Seconds between scrapes.")
    timeout_secs: float = Field(default=5.0, gt=0, description="A scrape taking longer than this fails (counted).")
    max_body_bytes: int = Field(
        default=8 * 1024 * 1024,
        gt=0,
        description="Largest exposition accepted; a larger one is refused and counted.",
    )


class GpuConfig(StrictModel):
    enabled: bool = Field(default=True, description="Collect GPU counters at all (NVML and/or dcgm-exporter).")
    nvml: NvmlConfig = Field(default_factory=NvmlConfig, description="The NVML source (local GPUs).")
    dcgm: DcgmConfig = Field(default_factory=DcgmConfig, description="The dcgm-exporter source.")
    max_series: int = Field(
        default=5000,
        gt=0,
        description="GPU series one source may export; samples above it are dropped and counted.",
    )
    stale_after_secs: float = Field(
        default=60.0,
        gt=0,
        description="A source whose last good sample is older than this exports nothing (no stale values are "
        "shown as current). Must exceed the sampling intervals of the enabled sources.",
    )

    @field_validator("stale_after_secs")
    @classmethod
    def _stale_after_intervals(cls, v: float, info: ValidationInfo) -> float:
        nvml: NvmlConfig | None = info.data.get("nvml")
        dcgm: DcgmConfig | None = info.data.get("dcgm")
        if nvml is not None and nvml.enabled and v <= nvml.interval_secs:
            raise ValueError(f"must be greater than gpu.nvml.interval_secs ({nvml.interval_secs})")
        if dcgm is not None and dcgm.enabled and v <= dcgm.interval_secs:
            raise ValueError(f"must be greater than gpu.dcgm.interval_secs ({dcgm.interval_secs})")
        return v
