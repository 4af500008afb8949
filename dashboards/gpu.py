"""GPU: per GPU (NVML or dcgm-exporter) and per process; the sampling's own health."""

from __future__ import annotations

from grafanalib.core import Dashboard

from dashboards.common import Board, datasource_var, label_var, steps

__all__ = ["board", "build"]

SEL = 'instance=~"$instance", gpu=~"$gpu"'
LEG = "GPU {{gpu}} {{name}}"
BY = "gpu, name"


def board() -> Board:
    b = Board(
        uid="triton-sidecar-gpu",
        title="Triton sidecar / GPU",
        tags=["triton", "sidecar", "gpu"],
        description="Per GPU and per process: utilisation, memory, power, temperature, clocks, throttling, errors.",
        variables=[
            datasource_var(),
            label_var("instance", "sidecar_gpu_visible_devices", label="Sidecar"),
            label_var("gpu", "sidecar_gpu_up", label="GPU", depends='instance=~"$instance"'),
        ],
    )
    b.row("Devices")
    b.stat(
        "Visible GPUs",
        "GPUs the sidecar sees, by source (nvml, dcgm). 0 on a machine without a GPU or when "
        "NVML cannot load (see GPU sampling errors below); a drop on a GPU host means a GPU fell off the bus "
        "(alert GpuLost).",
        [('sum by (source) (sidecar_gpu_visible_devices{instance=~"$instance"})', "{{source}}")],
        unit="short",
        needs="self",
    )
    b.stat(
        "GPUs up",
        "GPUs answering NVML. A GPU at 0 answered GPU_IS_LOST (alert GpuLost).",
        [(f"sum(sidecar_gpu_up{{{SEL}}})", "")],
        unit="short",
        needs="gpu",
        thresholds=steps(("red", None), ("green", 1)),
    )
    b.stat(
        "Worst memory use",
        "Highest used/total device memory over the selected GPUs. Above 95% new batches or "
        "model loads can fail with out-of-memory (alert GpuMemoryNearFull).",
        [(f"max(sidecar_gpu_memory_used_bytes{{{SEL}}} / sidecar_gpu_memory_total_bytes{{{SEL}}})", "")],
        unit="percentunit",
        needs="gpu",
        thresholds=steps(("green", None), ("orange", 0.85), ("red", 0.95)),
    )
    b.stat(
        "Throttling GPUs",
        "GPUs with a thermal or power-brake throttle reason active now (alert "
        "GpuThrottling). Idle and application-clock reasons are not counted.",
        [(f'count(max by (gpu) (sidecar_gpu_throttle_active{{{SEL}, reason=~"{THROTTLE}"}}) == 1) or vector(0)', "")],
        unit="short",
        needs="gpu",
        thresholds=steps(("green", None), ("red", 1)),
    )
    b.row("Utilisation and memory")
    b.timeseries(
        "GPU utilisation",
        "Share of time a kernel ran (NVML's coarse utilisation). Low utilisation with "
        "a growing queue points at CPU-side preprocessing or too small batches.",
        [(f"max by ({BY}) (sidecar_gpu_utilization_ratio{{{SEL}}})", LEG)],
        unit="percentunit",
        needs="gpu",
        max1=True,
    )
    b.timeseries(
        "Memory used / total",
        "Device memory in use as a share of the total. The line marks 95% (alert GpuMemoryNearFull).",
        [(f"max by ({BY}) (sidecar_gpu_memory_used_bytes{{{SEL}}} / sidecar_gpu_memory_total_bytes{{{SEL}}})", LEG)],
        unit="percentunit",
        needs="gpu",
        max1=True,
        thresholds=steps(("green", None), ("red", 0.95)),
    )
    b.timeseries(
        "Memory by process",
        "Device memory per process (pid, command). A process that is not Triton "
        "holding memory is the usual cause of out-of-memory on a shared GPU.",
        [
            (
                f"sum by (gpu, pid, command) (sidecar_gpu_process_memory_used_bytes{{{SEL}}})",
                "GPU {{gpu}} {{command}} ({{pid}})",
            )
        ],
        unit="bytes",
        needs="gpu",
        stack=True,
    )
    b.timeseries(
        "Memory: Triton versus others",
        "Device memory held by Triton's processes versus every other process.",
        [(f"sum by (gpu, owner) (sidecar_gpu_owner_memory_used_bytes{{{SEL}}})", "GPU {{gpu}} {{owner}}")],
        unit="bytes",
        needs="gpu",
        stack=True,
    )
    b.row("Power, heat and clocks")
    b.timeseries(
        "Power draw and limit",
        "Watts drawn against the enforced limit. Drawing at the limit for long "
        "makes the driver lower clocks (power-brake or SW power cap throttle).",
        [
            (f"max by ({BY}) (sidecar_gpu_power_draw_watts{{{SEL}}})", LEG + " draw"),
            (f"max by ({BY}) (sidecar_gpu_power_limit_watts{{{SEL}}})", LEG + " limit"),
        ],
        unit="watt",
        needs="gpu",
    )
    b.timeseries(
        "Temperature",
        "Core temperature. Above ~85 C most data-centre GPUs start thermal throttling (alert GpuThrottling).",
        [(f"max by ({BY}) (sidecar_gpu_temperature_celsius{{{SEL}}})", LEG)],
        unit="celsius",
        needs="gpu",
        thresholds=steps(("green", None), ("orange", 80), ("red", 87)),
    )
    b.timeseries(
        "SM and memory clocks",
        "Clock speeds. A drop while the GPU is busy is throttling; check the throttle reasons panel.",
        [
            (f"max by ({BY}) (sidecar_gpu_sm_clock_hertz{{{SEL}}})", LEG + " SM"),
            (f"max by ({BY}) (sidecar_gpu_memory_clock_hertz{{{SEL}}})", LEG + " memory"),
        ],
        unit="hertz",
        needs="gpu",
    )
    b.timeseries(
        "Throttle reasons active",
        "Each active clock-event reason (1 = active). thermal and "
        "power-brake reasons slow inference (alert GpuThrottling); gpu_idle is normal.",
        [(f"max by (gpu, reason) (sidecar_gpu_throttle_active{{{SEL}}}) == 1", "GPU {{gpu}} {{reason}}")],
        unit="short",
        needs="gpu",
    )
    b.timeseries(
        "PCIe throughput",
        "Bytes per second over PCIe by direction. Saturated PCIe with low GPU "
        "utilisation means inputs are copied host-to-device per request (consider CUDA shared memory).",
        [
            (
                f"max by (gpu, direction) (sidecar_gpu_pcie_throughput_bytes_per_second{{{SEL}}})",
                "GPU {{gpu}} {{direction}}",
            )
        ],
        unit="Bps",
        needs="gpu",
    )
    b.timeseries(
        "Energy per second",
        "Average power from the energy counter (joules per second).",
        [(f"sum by ({BY}) (rate(sidecar_gpu_energy_joules_total{{{SEL}}}[$__rate_interval]))", LEG)],
        unit="watt",
        needs="gpu",
    )
    b.row("Errors")
    b.timeseries(
        "ECC errors",
        "Corrected and uncorrected ECC errors per second. Any uncorrected error is "
        "critical (alert GpuEccUncorrectable); a rising corrected rate predicts a failing memory page.",
        [
            (
                f"sum by (gpu, type) (rate(sidecar_gpu_ecc_errors_total{{{SEL}}}[$__rate_interval]))",
                "GPU {{gpu}} {{type}}",
            )
        ],
        unit="short",
        needs="gpu",
    )
    b.timeseries(
        "XID errors",
        "XID critical-error events per GPU and the last XID code. XIDs 48, 63, 64, 74, 79 "
        "and 94/95 usually need a reset or a node drain (alert GpuXidError).",
        [
            (f"sum by (gpu) (increase(sidecar_gpu_xid_errors_total{{{SEL}}}[5m]))", "GPU {{gpu}} events"),
            (f"max by (gpu) (sidecar_gpu_last_xid{{{SEL}}})", "GPU {{gpu}} last XID"),
        ],
        unit="short",
        needs="gpu",
    )
    b.row("DCGM profiling (dcgm-exporter only)")
    b.timeseries(
        "SM active / occupancy / tensor / DRAM active",
        "DCGM profiling ratios: the share of time SMs, "
        "tensor cores and DRAM were busy. Far finer than utilisation: a GPU at 100% utilisation can have "
        "10% SM activity.",
        [
            (f"max by (gpu) (sidecar_gpu_sm_active_ratio{{{SEL}}})", "GPU {{gpu}} SM active"),
            (f"max by (gpu) (sidecar_gpu_sm_occupancy_ratio{{{SEL}}})", "GPU {{gpu}} SM occupancy"),
            (f"max by (gpu) (sidecar_gpu_tensor_active_ratio{{{SEL}}})", "GPU {{gpu}} tensor active"),
            (f"max by (gpu) (sidecar_gpu_dram_active_ratio{{{SEL}}})", "GPU {{gpu}} DRAM active"),
        ],
        unit="percentunit",
        needs="dcgm",
        max1=True,
        w=24,
    )
    b.row("Sampling health")
    b.timeseries(
        "GPU sampling errors",
        "NVML initialisation failures and per-field errors, DCGM scrape errors, "
        "and series dropped over max_series. On a CPU-only host nvml init failures are expected and "
        "harmless (alert GpuSamplingFailing covers a GPU host).",
        [
            ('sum by (reason) (sidecar_gpu_nvml_init_failures_total{instance=~"$instance"})', "nvml init {{reason}}"),
            (
                'sum by (field, reason) (rate(sidecar_gpu_nvml_errors_total{instance=~"$instance"}[$__rate_interval]))',
                "nvml {{field}} {{reason}}",
            ),
            (
                'sum by (reason) (rate(sidecar_gpu_dcgm_scrape_errors_total{instance=~"$instance"}[$__rate_interval]))',
                "dcgm {{reason}}",
            ),
        ],
        unit="short",
        needs="self",
    )
    b.timeseries(
        "Snapshots per second",
        "GPU samples handed to the exposition, by source. Zero on a GPU host means sampling stopped.",
        [
            (
                'sum by (source) (rate(sidecar_gpu_snapshots_total{instance=~"$instance"}[$__rate_interval]))',
                "{{source}}",
            )
        ],
        unit="ops",
        needs="self",
    )
    return b


# Throttle reasons that cost performance (idle, application clocks and sync boost are normal).
THROTTLE = "hw_slowdown|hw_thermal_slowdown|hw_power_brake_slowdown|sw_thermal_slowdown|sw_power_cap"


def build() -> Dashboard:
    return board().build()
