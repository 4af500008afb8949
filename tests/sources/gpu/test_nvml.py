"""The NVML source against the NVML stand-in (gpu_fake_nvml.py), which raises pynvml's real errors."""

from __future__ import annotations

import logging

import pynvml
import pytest
from gpu_fake_nvml import GIB, FakeGpu, make_rig

U0 = "GPU-11111111-2222-3333-4444-555555555555"
U1 = "GPU-66666666-7777-8888-9999-000000000000"


def lab(gpu: str, uuid: str, **extra: str) -> dict[str, str]:
    return {"gpu": gpu, "uuid": uuid, "name": "NVIDIA H100 80GB HBM3", "source": "nvml", **extra}


def test_values_are_exported_in_base_units_with_named_throttle_reasons() -> None:
    rig = make_rig([FakeGpu(U0), FakeGpu(U1, util=(0, 0), throttle_mask=pynvml.nvmlClocksEventReasonGpuIdle)])
    rig.source.sample_once()
    v = rig.value
    assert v("sidecar_gpu_visible_devices", source="nvml") == 2
    assert v("sidecar_gpu_up", **lab("0", U0)) == 1
    assert v("sidecar_gpu_info", **lab("0", U0), driver_version="550.54.15") == 1
    assert v("sidecar_gpu_utilization_ratio", **lab("0", U0)) == pytest.approx(0.75)
    assert v("sidecar_gpu_memory_utilization_ratio", **lab("0", U0)) == pytest.approx(0.30)
    assert v("sidecar_gpu_utilization_ratio", **lab("1", U1)) == 0  # a real reading of 0%, not a filler
    assert v("sidecar_gpu_memory_used_bytes", **lab("0", U0)) == 10 * GIB
    assert v("sidecar_gpu_memory_free_bytes", **lab("0", U0)) == 70 * GIB
    assert v("sidecar_gpu_memory_total_bytes", **lab("0", U0)) == 80 * GIB
    assert v("sidecar_gpu_power_draw_watts", **lab("0", U0)) == pytest.approx(312.5)
    assert v("sidecar_gpu_power_limit_watts", **lab("0", U0)) == pytest.approx(700.0)
    assert v("sidecar_gpu_temperature_celsius", **lab("0", U0)) == 61
    assert v("sidecar_gpu_sm_clock_hertz", **lab("0", U0)) == pytest.approx(1.98e9)
    assert v("sidecar_gpu_memory_clock_hertz", **lab("0", U0)) == pytest.approx(2.619e9)
    assert v("sidecar_gpu_pcie_throughput_bytes_per_second", **lab("0", U0), direction="tx") == 1000 * 1024
    assert v("sidecar_gpu_pcie_throughput_bytes_per_second", **lab("0", U0), direction="rx") == 2000 * 1024
    assert v("sidecar_gpu_energy_joules_total", **lab("0", U0)) == pytest.approx(123_456.789)
    assert v("sidecar_gpu_ecc_errors_total", **lab("0", U0), type="corrected") == 3
    assert v("sidecar_gpu_ecc_errors_total", **lab("0", U0), type="uncorrected") == 0
    # the bit mask comes out as named reasons
    assert v("sidecar_gpu_throttle_active", **lab("0", U0), reason="sw_power_cap") == 1
    assert v("sidecar_gpu_throttle_active", **lab("0", U0), reason="hw_thermal_slowdown") == 1
    assert v("sidecar_gpu_throttle_active", **lab("0", U0), reason="gpu_idle") == 0
    assert v("sidecar_gpu_throttle_active", **lab("1", U1), reason="gpu_idle") == 1
    assert v("sidecar_gpu_throttle_active", **lab("1", U1), reason="sw_power_cap") == 0
    assert rig.hub.gpu_by_uuid() == {
        U0: {"index": "0", "name": "NVIDIA H100 80GB HBM3", "source": "nvml"},
        U1: {"index": "1", "name": "NVIDIA H100 80GB HBM3", "source": "nvml"},
    }
    assert rig.hub.readiness().ok
    assert "nvml: 2 GPU(s) visible" in rig.hub.readiness().detail


def test_failing_fields_are_skipped_and_counted_not_the_whole_sample() -> None:
    gpu0 = FakeGpu(
        U0,
        errors={
            "nvmlDeviceGetTotalEccErrors": pynvml.NVML_ERROR_NOT_SUPPORTED,
            "nvmlDeviceGetTotalEnergyConsumption": pynvml.NVML_ERROR_NOT_SUPPORTED,
            "nvmlDeviceGetComputeRunningProcesses": pynvml.NVML_ERROR_NO_PERMISSION,
        },
        processes=[(10, GIB)],
    )
    rig = make_rig([gpu0, FakeGpu(U1, processes=[(11, GIB)])], processes={10: "tritonserver", 11: "tritonserver"})
    rig.source.sample_once()
    v = rig.value
    assert v("sidecar_gpu_ecc_errors_total", **lab("0", U0), type="corrected") is None
    assert v("sidecar_gpu_energy_joules_total", **lab("0", U0)) is None
    assert v("sidecar_gpu_owner_memory_used_bytes", **lab("0", U0), owner="triton") is None
    # the rest of GPU 0, and GPU 1 entirely, are still there
    assert v("sidecar_gpu_temperature_celsius", **lab("0", U0)) == 61
    assert v("sidecar_gpu_up", **lab("0", U0)) == 1
    assert v("sidecar_gpu_energy_joules_total", **lab("1", U1)) is not None
    assert v("sidecar_gpu_owner_memory_used_bytes", **lab("1", U1), owner="triton") == GIB
    errs = "sidecar_gpu_nvml_errors_total"
    assert v(errs, field="ecc_corrected", reason="not_supported") == 1
    assert v(errs, field="ecc_uncorrected", reason="not_supported") == 1
    assert v(errs, field="energy", reason="not_supported") == 1
    assert v(errs, field="processes", reason="no_permission") == 1

    ecc_calls = rig.nvml.calls["nvmlDeviceGetTotalEccErrors"]
    rig.clock.advance(10)
    rig.source.sample_once()
    # NOT_SUPPORTED never changes on a GPU: not asked again; NO_PERMISSION is retried and counted again
    assert rig.nvml.calls["nvmlDeviceGetTotalEccErrors"] == ecc_calls + 2  # GPU 1's two calls only
    assert v(errs, field="ecc_corrected", reason="not_supported") == 1
    assert v(errs, field="processes", reason="no_permission") == 2


def test_a_gpu_that_falls_off_the_bus_shows_as_down_and_keeps_its_identity() -> None:
    gpus = [FakeGpu(U0), FakeGpu(U1)]
    rig = make_rig(gpus)
    rig.source.sample_once()
    gpus[1].lost = True
    rig.clock.advance(10)
    rig.source.sample_once()
    v = rig.value
    assert v("sidecar_gpu_up", **lab("1", U1)) == 0
    assert v("sidecar_gpu_temperature_celsius", **lab("1", U1)) is None  # no stale value shown as current
    assert v("sidecar_gpu_memory_used_bytes", **lab("1", U1)) is None
    assert v("sidecar_gpu_up", **lab("0", U0)) == 1
    assert v("sidecar_gpu_temperature_celsius", **lab("0", U0)) == 61
    assert v("sidecar_gpu_visible_devices", source="nvml") == 2
    assert v("sidecar_gpu_nvml_errors_total", field="handle", reason="gpu_is_lost") == 1
    assert "1 not answering" in rig.hub.readiness().detail
    assert U1 not in rig.hub.gpu_by_uuid()


def test_gpu_lost_in_the_middle_of_a_device_sample_drops_that_gpus_partial_values() -> None:
    gpus = [FakeGpu(U0, errors={"nvmlDeviceGetPowerUsage": pynvml.NVML_ERROR_GPU_IS_LOST})]
    rig = make_rig(gpus)
    rig.source.sample_once()
    assert rig.value("sidecar_gpu_up", **lab("0", U0)) == 0
    assert rig.value("sidecar_gpu_utilization_ratio", **lab("0", U0)) is None
    assert rig.value("sidecar_gpu_nvml_errors_total", field="power_draw", reason="gpu_is_lost") == 1


def test_uninitialized_ends_the_sample_and_nvml_is_initialised_again_next_tick() -> None:
    rig = make_rig([FakeGpu(U0)])
    rig.source.sample_once()
    assert rig.nvml.calls["nvmlInit"] == 1
    rig.nvml.initialized = False  # another user of the process called nvmlShutdown under us
    rig.clock.advance(10)
    rig.source.sample_once()
    assert rig.value("sidecar_gpu_nvml_errors_total", field="device_count", reason="uninitialized") == 1
    assert rig.value("sidecar_gpu_up", **lab("0", U0)) is None
    assert rig.value("sidecar_gpu_visible_devices", source="nvml") == 0
    rig.clock.advance(10)
    rig.source.sample_once()
    assert rig.nvml.calls["nvmlInit"] == 2
    assert rig.value("sidecar_gpu_up", **lab("0", U0)) == 1


def test_xid_events_are_counted_per_gpu_and_the_last_code_kept() -> None:
    rig = make_rig([FakeGpu(U0), FakeGpu(U1)])
    rig.nvml.register_error[0] = pynvml.NVML_ERROR_NOT_SUPPORTED
    rig.source.sample_once()
    assert rig.nvml.registered == [1]
    assert rig.value("sidecar_gpu_xid_errors_total", **lab("1", U1)) == 0  # listening, none seen
    assert rig.value("sidecar_gpu_xid_errors_total", **lab("0", U0)) is None  # not listening: unknown
    assert rig.value("sidecar_gpu_last_xid", **lab("1", U1)) is None
    assert rig.value("sidecar_gpu_nvml_errors_total", field="xid_events", reason="not_supported") == 1
    rig.nvml.xid(1, 79)
    rig.nvml.xid(1, 13)
    rig.clock.advance(10)
    rig.source.sample_once()
    assert rig.value("sidecar_gpu_xid_errors_total", **lab("1", U1)) == 2
    assert rig.value("sidecar_gpu_last_xid", **lab("1", U1)) == 13
    assert rig.nvml.registered == [1]  # registered once, not per sample


def test_xid_events_drained_per_sample_are_bounded() -> None:
    rig = make_rig([FakeGpu(U0)], gpu_config={"nvml": {"max_events_per_sample": 2}})
    rig.source.sample_once()
    for code in (31, 43, 45):
        rig.nvml.xid(0, code)
    rig.source.sample_once()
    assert rig.value("sidecar_gpu_xid_errors_total", **lab("0", U0)) == 2
    assert rig.value("sidecar_gpu_skipped_total", what="events") == 1
    rig.source.sample_once()
    assert rig.value("sidecar_gpu_xid_errors_total", **lab("0", U0)) == 3


def test_process_memory_tells_triton_apart_from_other_tenants() -> None:
    procs = [(100, 3 * GIB), (101, GIB), (200, 2 * GIB), (300, None)]
    rig = make_rig(
        [FakeGpu(U0, processes=procs)],
        processes={100: "tritonserver", 101: "triton_python_b", 200: "python3"},
        gpu_config={"nvml": {"max_processes_per_gpu": 2}},
    )
    rig.source.sample_once()
    v = rig.value
    assert v("sidecar_gpu_owner_memory_used_bytes", **lab("0", U0), owner="triton") == 4 * GIB
    assert v("sidecar_gpu_owner_memory_used_bytes", **lab("0", U0), owner="other") == 2 * GIB
    assert (
        v(
            "sidecar_gpu_process_memory_used_bytes",
            **lab("0", U0),
            pid="100",
            command="tritonserver",
            owner="triton",
        )
        == 3 * GIB
    )
    assert (
        v(
            "sidecar_gpu_process_memory_used_bytes",
            **lab("0", U0),
            pid="200",
            command="python3",
            owner="other",
        )
        == 2 * GIB
    )
    # bounded: the third-largest process is not exported as a series, but counted
    assert (
        v(
            "sidecar_gpu_process_memory_used_bytes",
            **lab("0", U0),
            pid="101",
            command="triton_python_b",
            owner="triton",
        )
        is None
    )
    assert v("sidecar_gpu_skipped_total", what="processes") == 1


def test_without_a_driver_no_gpu_is_visible_one_log_line_and_init_retried_on_its_own_interval(
    caplog: pytest.LogCaptureFixture,
) -> None:
    rig = make_rig([FakeGpu(U0)], init_error=pynvml.NVML_ERROR_DRIVER_NOT_LOADED)
    with caplog.at_level(logging.INFO, logger="sidecar.sources.gpu.nvml"):
        for _ in range(5):
            rig.source.sample_once()
            rig.clock.advance(10)
    lines = [r for r in caplog.records if r.name == "sidecar.sources.gpu.nvml"]
    assert len(lines) == 1
    assert "no GPU is visible" in lines[0].getMessage() and "Driver Not Loaded" in lines[0].getMessage()
    assert rig.nvml.calls["nvmlInit"] == 1  # 40 s < init_retry_secs
    assert rig.value("sidecar_gpu_visible_devices", source="nvml") == 0
    assert rig.value("sidecar_gpu_nvml_init_failures_total", reason="driver_not_loaded") == 1
    readiness = rig.hub.readiness()
    assert readiness.ok and "nvml: no GPU visible" in readiness.detail
    # the driver comes back: after the retry interval the GPU appears, with one more log line
    rig.nvml.init_error = None
    rig.clock.advance(300)
    with caplog.at_level(logging.INFO, logger="sidecar.sources.gpu.nvml"):
        rig.source.sample_once()
    assert rig.value("sidecar_gpu_visible_devices", source="nvml") == 1
    assert rig.value("sidecar_gpu_up", **lab("0", U0)) == 1


def test_no_fabricated_zeros_and_no_stale_values() -> None:
    rig = make_rig([FakeGpu(U0)], init_error=pynvml.NVML_ERROR_LIBRARY_NOT_FOUND)
    rig.source.sample_once()
    names = {m.name for m in rig.registry.collect()}
    gpu_series = [
        s for m in rig.registry.collect() for s in m.samples if s.name.startswith("sidecar_gpu_") and "gpu" in s.labels
    ]
    assert gpu_series == []
    assert "sidecar_gpu_visible_devices" in names

    rig.nvml.init_error = None
    rig.clock.advance(300)
    rig.source.sample_once()
    assert rig.value("sidecar_gpu_temperature_celsius", **lab("0", U0)) == 61
    # the sampler stops (hung, crashed): after stale_after_secs nothing from it is exported as current
    rig.clock.advance(61)
    assert rig.value("sidecar_gpu_temperature_celsius", **lab("0", U0)) is None
    assert rig.value("sidecar_gpu_visible_devices", source="nvml") is None
    assert rig.hub.gpu_by_uuid() == {}
    assert "no fresh sample" in rig.hub.readiness().detail


def test_max_gpus_bounds_the_devices_sampled() -> None:
    rig = make_rig([FakeGpu(U0), FakeGpu(U1)], gpu_config={"nvml": {"max_gpus": 1}})
    rig.source.sample_once()
    assert rig.value("sidecar_gpu_up", **lab("0", U0)) == 1
    assert rig.value("sidecar_gpu_up", **lab("1", U1)) is None
    assert rig.value("sidecar_gpu_skipped_total", what="gpus") == 1


def test_max_series_bounds_the_snapshot_and_counts_the_overflow() -> None:
    rig = make_rig([FakeGpu(U0)], gpu_config={"max_series": 5})
    rig.source.sample_once()
    exported = [s for m in rig.registry.collect() for s in m.samples if s.labels.get("uuid") == U0]
    assert len(exported) == 5
    assert (rig.value("sidecar_gpu_series_dropped_total", source="nvml", reason="max_series") or 0) > 0


async def test_start_samples_in_the_background_and_shutdown_is_idempotent() -> None:
    import asyncio

    rig = make_rig([FakeGpu(U0)])
    await rig.source.shutdown()  # safe without start
    rig2 = make_rig([FakeGpu(U0)])
    await rig2.source.start()
    deadline = asyncio.get_running_loop().time() + 5
    while rig2.value("sidecar_gpu_up", **lab("0", U0)) is None:
        assert asyncio.get_running_loop().time() < deadline, "no sample within 5 s"
        await asyncio.sleep(0.01)
    await rig2.source.shutdown()
    await rig2.source.shutdown()
    assert rig2.nvml.shutdowns == 1
    assert rig2.nvml.calls.get("nvmlEventSetFree") == 1
    assert rig2.source.sample_once() == 0  # stopped: no more NVML calls


def test_command_lines_are_read_from_proc_bounded_and_a_gone_pid_raises_file_not_found() -> None:
    import os

    from sidecar.sources.gpu.nvml_calls import MAX_CMDLINE_ARGS, MAX_CMDLINE_BYTES, read_cmdline, split_cmdline

    with open("/proc/self/cmdline", "rb") as f:
        expected = f.read().split(b"\0")[0].decode()
    assert split_cmdline(read_cmdline(os.getpid()))[0] == expected  # argv, NUL split, trailing NUL dropped
    with pytest.raises(FileNotFoundError):
        read_cmdline(0)  # /proc/0 never exists: what a pid that ended looks like
    long = b"\0".join([b"x" * 100] * 100) + b"\0"
    assert len(split_cmdline(long)) == MAX_CMDLINE_ARGS
    assert sum(len(a) + 1 for a in split_cmdline(b"y" * (2 * MAX_CMDLINE_BYTES))) <= MAX_CMDLINE_BYTES + 1
