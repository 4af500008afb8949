"""The one vocabulary both GPU sources speak: series names, units, throttle reasons, DCGM field mapping.

NVML and dcgm-exporter report the same physical quantities in different units and names; everything here
converts to base units (bytes, watts, celsius, hertz, joules, ratio 0..1) so dashboards and rules work with
either source.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Literal

import pynvml

__all__ = [
    "DCGM_FIELDS",
    "SERIES",
    "THROTTLE_REASONS",
    "DcgmField",
    "GpuSample",
    "SeriesSpec",
    "decode_throttle_reasons",
    "is_dcgm_blank",
]

Labels = tuple[tuple[str, str], ...]


@dataclass(frozen=True, slots=True)
class GpuSample:
    """One value of one series; ``labels`` are sorted (name, value) pairs."""

    name: str
    labels: Labels
    value: float

    @staticmethod
    def of(name: str, labels: dict[str, str], value: float) -> GpuSample:
        return GpuSample(name, tuple(sorted((k, v) for k, v in labels.items() if v != "")), float(value))


@dataclass(frozen=True, slots=True)
class SeriesSpec:
    kind: Literal["gauge", "counter"]
    help: str


# Counters are named without _total here; the exposition adds it, as prometheus_client does for its own.
SERIES: dict[str, SeriesSpec] = {
    "sidecar_gpu_up": SeriesSpec(
        "gauge",
        "1 when the GPU answered its last sample, 0 when it is lost (fell off the bus, GPU_IS_LOST) or did not answer.",
    ),
    "sidecar_gpu_info": SeriesSpec("gauge", "Always 1; labels name the GPU and its driver version."),
    "sidecar_gpu_utilization_ratio": SeriesSpec("gauge", "Fraction of the last sample period a kernel ran (0..1)."),
    "sidecar_gpu_memory_utilization_ratio": SeriesSpec(
        "gauge", "Fraction of the last sample period device memory was read or written (0..1)."
    ),
    "sidecar_gpu_memory_used_bytes": SeriesSpec("gauge", "Device memory in use."),
    "sidecar_gpu_memory_free_bytes": SeriesSpec("gauge", "Device memory free."),
    "sidecar_gpu_memory_total_bytes": SeriesSpec("gauge", "Device memory installed."),
    "sidecar_gpu_power_draw_watts": SeriesSpec("gauge", "Power drawn by the board."),
    "sidecar_gpu_power_limit_watts": SeriesSpec("gauge", "Power limit the driver enforces."),
    "sidecar_gpu_temperature_celsius": SeriesSpec("gauge", "GPU core temperature."),
    "sidecar_gpu_sm_clock_hertz": SeriesSpec("gauge", "Current SM clock."),
    "sidecar_gpu_memory_clock_hertz": SeriesSpec("gauge", "Current memory clock."),
    "sidecar_gpu_pcie_throughput_bytes_per_second": SeriesSpec(
        "gauge", "PCIe traffic by direction (tx: GPU to host, rx: host to GPU)."
    ),
    "sidecar_gpu_energy_joules": SeriesSpec("counter", "Energy the GPU consumed since the driver was loaded."),
    "sidecar_gpu_throttle_active": SeriesSpec(
        "gauge", "1 when the named reason is holding the clocks down now, 0 when it is not."
    ),
    "sidecar_gpu_ecc_errors": SeriesSpec(
        "counter", "Volatile ECC errors since the driver was loaded, by type (corrected, uncorrected)."
    ),
    "sidecar_gpu_xid_errors": SeriesSpec(
        "counter", "XID critical-error events NVML delivered since the sidecar started listening."
    ),
    "sidecar_gpu_last_xid": SeriesSpec("gauge", "Code of the most recent XID error (DCGM reports 0 when none)."),
    "sidecar_gpu_process_memory_used_bytes": SeriesSpec(
        "gauge", "Device memory one compute process holds (largest processes per GPU, bounded)."
    ),
    "sidecar_gpu_owner_memory_used_bytes": SeriesSpec(
        "gauge", "Device memory held by Triton's processes (owner=triton) and by every other process (other)."
    ),
    "sidecar_gpu_sm_active_ratio": SeriesSpec("gauge", "DCGM profiling: fraction of cycles an SM had a warp."),
    "sidecar_gpu_sm_occupancy_ratio": SeriesSpec("gauge", "DCGM profiling: resident warps / maximum warps."),
    "sidecar_gpu_tensor_active_ratio": SeriesSpec("gauge", "DCGM profiling: fraction of cycles the tensor pipe ran."),
    "sidecar_gpu_dram_active_ratio": SeriesSpec(
        "gauge", "DCGM profiling: fraction of cycles the memory interface was busy."
    ),
    "sidecar_gpu_graphics_engine_active_ratio": SeriesSpec(
        "gauge", "DCGM profiling: fraction of time the graphics/compute engine was busy."
    ),
}

# Named reasons for NVML's clocks-event (throttle) bit mask; DCGM's CLOCK_THROTTLE_REASONS uses the same bits.
THROTTLE_REASONS: tuple[tuple[int, str], ...] = (
    (pynvml.nvmlClocksEventReasonGpuIdle, "gpu_idle"),
    (pynvml.nvmlClocksEventReasonApplicationsClocksSetting, "applications_clocks_setting"),
    (pynvml.nvmlClocksEventReasonSwPowerCap, "sw_power_cap"),
    (pynvml.nvmlClocksEventReasonHwSlowdown, "hw_slowdown"),
    (pynvml.nvmlClocksEventReasonSyncBoost, "sync_boost"),
    (pynvml.nvmlClocksEventReasonSwThermalSlowdown, "sw_thermal_slowdown"),
    (pynvml.nvmlClocksEventReasonHwThermalSlowdown, "hw_thermal_slowdown"),
    (pynvml.nvmlClocksEventReasonHwPowerBrakeSlowdown, "hw_power_brake_slowdown"),
    (pynvml.nvmlClocksEventReasonDisplayClockSetting, "display_clock_setting"),
)


def decode_throttle_reasons(mask: int) -> dict[str, int]:
    """Every known reason with 1 (active) or 0; unknown bits are ignored rather than invented as labels."""
    return {name: 1 if mask & bit else 0 for bit, name in THROTTLE_REASONS}


@dataclass(frozen=True, slots=True)
class DcgmField:
    series: str
    scale: float = 1.0
    extra: tuple[tuple[str, str], ...] = ()
    throttle_mask: bool = False


_MIB = 1024.0 * 1024.0
DCGM_FIELDS: dict[str, DcgmField] = {
    "DCGM_FI_DEV_GPU_UTIL": DcgmField("sidecar_gpu_utilization_ratio", 0.01),
    "DCGM_FI_DEV_MEM_COPY_UTIL": DcgmField("sidecar_gpu_memory_utilization_ratio", 0.01),
    "DCGM_FI_DEV_FB_USED": DcgmField("sidecar_gpu_memory_used_bytes", _MIB),
    "DCGM_FI_DEV_FB_FREE": DcgmField("sidecar_gpu_memory_free_bytes", _MIB),
    "DCGM_FI_DEV_FB_TOTAL": DcgmField("sidecar_gpu_memory_total_bytes", _MIB),
    "DCGM_FI_DEV_POWER_USAGE": DcgmField("sidecar_gpu_power_draw_watts"),
    "DCGM_FI_DEV_ENFORCED_POWER_LIMIT": DcgmField("sidecar_gpu_power_limit_watts"),
    "DCGM_FI_DEV_GPU_TEMP": DcgmField("sidecar_gpu_temperature_celsius"),
    "DCGM_FI_DEV_SM_CLOCK": DcgmField("sidecar_gpu_sm_clock_hertz", 1e6),
    "DCGM_FI_DEV_MEM_CLOCK": DcgmField("sidecar_gpu_memory_clock_hertz", 1e6),
    "DCGM_FI_PROF_PCIE_TX_BYTES": DcgmField(
        "sidecar_gpu_pcie_throughput_bytes_per_second", extra=(("direction", "tx"),)
    ),
    "DCGM_FI_PROF_PCIE_RX_BYTES": DcgmField(
        "sidecar_gpu_pcie_throughput_bytes_per_second", extra=(("direction", "rx"),)
    ),
    "DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION": DcgmField("sidecar_gpu_energy_joules", 0.001),
    # DCGM 3.x calls it CLOCK_THROTTLE_REASONS, DCGM 4 CLOCKS_EVENT_REASONS; same bit mask as NVML.
    "DCGM_FI_DEV_CLOCK_THROTTLE_REASONS": DcgmField("sidecar_gpu_throttle_active", throttle_mask=True),
    "DCGM_FI_DEV_CLOCKS_EVENT_REASONS": DcgmField("sidecar_gpu_throttle_active", throttle_mask=True),
    "DCGM_FI_DEV_ECC_SBE_VOL_TOTAL": DcgmField("sidecar_gpu_ecc_errors", extra=(("type", "corrected"),)),
    "DCGM_FI_DEV_ECC_DBE_VOL_TOTAL": DcgmField("sidecar_gpu_ecc_errors", extra=(("type", "uncorrected"),)),
    "DCGM_FI_DEV_XID_ERRORS": DcgmField("sidecar_gpu_last_xid"),
    "DCGM_FI_PROF_SM_ACTIVE": DcgmField("sidecar_gpu_sm_active_ratio"),
    "DCGM_FI_PROF_SM_OCCUPANCY": DcgmField("sidecar_gpu_sm_occupancy_ratio"),
    "DCGM_FI_PROF_PIPE_TENSOR_ACTIVE": DcgmField("sidecar_gpu_tensor_active_ratio"),
    "DCGM_FI_PROF_DRAM_ACTIVE": DcgmField("sidecar_gpu_dram_active_ratio"),
    "DCGM_FI_PROF_GR_ENGINE_ACTIVE": DcgmField("sidecar_gpu_graphics_engine_active_ratio"),
}

# DCGM's "no value" sentinels (dcgm_structs.h): each BLANK and the few codes just above it (NOT_FOUND,
# NOT_SUPPORTED, NOT_PERMISSIONED) mean "not available", never a reading.
_INT32_BLANK = 0x7FFFFFF0
_INT64_BLANK = 0x7FFFFFFFFFFFFFF0
_FP64_BLANK = 140737488355328.0  # 2**47


def is_dcgm_blank(value: float | int) -> bool:
    """True for DCGM's not-available codes; ints are compared exactly (the parser keeps integers as int)."""
    if isinstance(value, int):
        return value >= _INT64_BLANK or _INT32_BLANK <= value <= 0x7FFFFFFF or (_FP64_BLANK <= value < _FP64_BLANK + 16)
    if math.isnan(value) or math.isinf(value):
        return True
    if value >= float(_INT64_BLANK):
        return True  # floats round the int64 codes up to 2**63; no real GPU reading is that large
    if _FP64_BLANK <= value < _FP64_BLANK + 16:
        return True
    return _INT32_BLANK <= value <= 0x7FFFFFFF and value == int(value)
