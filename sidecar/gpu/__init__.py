"""GPU counters: NVML sampling, dcgm-exporter scraping, one exposition, and honest behaviour without a GPU."""

from sidecar.gpu.config import DcgmConfig, GpuConfig, NvmlConfig
from sidecar.gpu.dcgm import DcgmSource, parse_dcgm
from sidecar.gpu.exposition import GpuHub, GpuIdentity
from sidecar.gpu.nvml import NvmlSource

__all__ = [
    "DcgmConfig",
    "DcgmSource",
    "GpuConfig",
    "GpuHub",
    "GpuIdentity",
    "NvmlConfig",
    "NvmlSource",
    "parse_dcgm",
]
