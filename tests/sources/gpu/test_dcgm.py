"""The dcgm-exporter source against a recorded exposition in dcgm-exporter 3.x's format (tests/data/gpu/)."""

from __future__ import annotations

from pathlib import Path

import httpx
import pytest
from gpu_fake_nvml import FakeGpu, make_rig
from prometheus_client import CollectorRegistry

from sidecar.clock import FakeClock
from sidecar.processors.gpu_series import is_dcgm_blank
from sidecar.sources.gpu.config import GpuConfig
from sidecar.sources.gpu.dcgm import DcgmSource, parse_dcgm
from sidecar.state.gpus import GpuHub

DATA = Path(__file__).resolve().parents[2] / "data" / "gpu"
EXPO = (DATA / "dcgm-exporter-3.3.txt").read_text()
G0 = "GPU-5d2b7c8e-1f3a-4e0b-9a61-2c7d0e4f8b13"
G1 = "GPU-a0e4c19b-77d2-4b58-8c3e-9f1d25b6e740"
MODEL = "NVIDIA A100-SXM4-40GB"
POD = {"pod": "triton-ctr-6b9f7d5c4-x2kqp", "namespace": "serving", "container": "triton"}
URL = "http://dcgm.test:9400/metrics"


def l0(**extra: str) -> dict[str, str]:
    return {"gpu": "0", "uuid": G0, "name": MODEL, "source": "dcgm", **POD, **extra}


def l1(**extra: str) -> dict[str, str]:
    return {"gpu": "1", "uuid": G1, "name": MODEL, "source": "dcgm", **extra}


class Rig:
    def __init__(self, handler: httpx.MockTransport | None = None, **dcgm: object) -> None:
        self.registry = CollectorRegistry(auto_describe=True)
        self.clock = FakeClock()
        cfg = GpuConfig.model_validate({"nvml": {"enabled": False}, "dcgm": {"enabled": True, "url": URL, **dcgm}})
        self.hub = GpuHub(
            registry=self.registry, clock=self.clock, max_series=cfg.max_series, stale_after_secs=cfg.stale_after_secs
        )
        self.body = EXPO
        self.status = 200
        transport = handler or httpx.MockTransport(lambda req: httpx.Response(self.status, text=self.body))
        self.http = httpx.AsyncClient(transport=transport)
        self.source = DcgmSource(cfg.dcgm, hub=self.hub, registry=self.registry, clock=self.clock, http=self.http)

    def value(self, metric: str, /, **labels: str) -> float | None:
        return self.registry.get_sample_value(metric, labels)


async def test_recorded_exposition_maps_onto_the_sidecar_names_units_and_labels() -> None:
    rig = Rig()
    assert await rig.source.scrape_once() > 0
    v = rig.value
    assert v("sidecar_gpu_visible_devices", source="dcgm") == 2
    assert v("sidecar_gpu_sm_clock_hertz", **l0()) == pytest.approx(1.41e9)
    assert v("sidecar_gpu_memory_clock_hertz", **l1()) == pytest.approx(1.215e9)
    assert v("sidecar_gpu_memory_used_bytes", **l0()) == 31159 * 1024 * 1024
    assert v("sidecar_gpu_memory_free_bytes", **l0()) == 9210 * 1024 * 1024
    assert v("sidecar_gpu_utilization_ratio", **l0()) == pytest.approx(0.87)
    assert v("sidecar_gpu_memory_utilization_ratio", **l0()) == pytest.approx(0.41)
    assert v("sidecar_gpu_power_draw_watts", **l0()) == pytest.approx(213.488)
    assert v("sidecar_gpu_temperature_celsius", **l0()) == 47
    assert v("sidecar_gpu_energy_joules_total", **l0()) == pytest.approx(1_083_471.92)
    assert v("sidecar_gpu_pcie_throughput_bytes_per_second", **l0(direction="tx")) == 28462194
    assert v("sidecar_gpu_pcie_throughput_bytes_per_second", **l0(direction="rx")) == 135087552
    assert v("sidecar_gpu_ecc_errors_total", **l0(type="corrected")) == 2
    assert v("sidecar_gpu_last_xid", **l1()) == 79
    assert v("sidecar_gpu_graphics_engine_active_ratio", **l0()) == pytest.approx(0.81234)
    assert v("sidecar_gpu_tensor_active_ratio", **l0()) == pytest.approx(0.301225)
    # 68 = sw_power_cap | hw_thermal_slowdown, decoded into named reasons like NVML's
    assert v("sidecar_gpu_throttle_active", **l0(reason="sw_power_cap")) == 1
    assert v("sidecar_gpu_throttle_active", **l0(reason="hw_thermal_slowdown")) == 1
    assert v("sidecar_gpu_throttle_active", **l0(reason="gpu_idle")) == 0
    assert v("sidecar_gpu_throttle_active", **l1(reason="gpu_idle")) == 1
    # pod labels kept where dcgm-exporter gives them; empty ones (GPU 1) are not labels at all
    assert v("sidecar_gpu_up", gpu="0", uuid=G0, name=MODEL, source="dcgm") == 1
    assert v("sidecar_gpu_info", gpu="1", uuid=G1, name=MODEL, source="dcgm", driver_version="535.129.03") == 1
    assert rig.hub.gpu_by_uuid() == {
        G0: {"index": "0", "name": MODEL, "source": "dcgm"},
        G1: {"index": "1", "name": MODEL, "source": "dcgm"},
    }
    await rig.http.aclose()


async def test_blank_sentinels_are_missing_not_numbers_and_are_counted() -> None:
    rig = Rig()
    await rig.source.scrape_once()
    v = rig.value
    assert v("sidecar_gpu_power_draw_watts", **l1()) is None  # 140737488355330.000000 (FP64 not supported)
    assert v("sidecar_gpu_ecc_errors_total", **l1(type="corrected")) is None  # 9223372036854775794
    assert v("sidecar_gpu_pcie_throughput_bytes_per_second", **l1(direction="tx")) is None
    blank = "sidecar_gpu_dcgm_blank_values_total"
    assert v(blank, series="sidecar_gpu_power_draw_watts") == 1
    assert v(blank, series="sidecar_gpu_ecc_errors") == 2
    assert v(blank, series="sidecar_gpu_pcie_throughput_bytes_per_second") == 2
    for sample in (s for m in rig.registry.collect() for s in m.samples):
        assert sample.value < 1e14, sample  # no sentinel leaked into the exposition
    await rig.http.aclose()


async def test_a_malformed_line_is_counted_and_costs_only_that_line() -> None:
    rig = Rig()
    await rig.source.scrape_once()
    assert rig.value("sidecar_gpu_dcgm_malformed_lines_total") == 1
    assert rig.value("sidecar_gpu_temperature_celsius", **l1()) == 31  # the good line before it survived
    # MEMORY_TEMP, PCIE_REPLAY_COUNTER, ENC_UTIL, DEC_UTIL, NVLINK_BANDWIDTH_TOTAL, two GPUs each
    assert rig.value("sidecar_gpu_dcgm_unmapped_samples_total") == 10
    await rig.http.aclose()


def test_sentinel_detection_is_exact() -> None:
    assert is_dcgm_blank(9223372036854775794)
    assert is_dcgm_blank(9223372036854775792)
    assert is_dcgm_blank(2147483632)
    assert is_dcgm_blank(140737488355328.0)
    assert is_dcgm_blank(float("nan"))
    assert not is_dcgm_blank(2147483631)  # an energy counter passing 2.1e9 mJ is a real value
    assert not is_dcgm_blank(2147483648)
    assert not is_dcgm_blank(213.488)
    assert not is_dcgm_blank(0)


def test_nvml_and_dcgm_export_the_same_names_and_label_keys() -> None:
    nv = make_rig([FakeGpu("GPU-x")])
    nv.source.sample_once()
    nvml_names = {s.name for m in nv.registry.collect() for s in m.samples if s.labels.get("source") == "nvml"}
    dcgm = parse_dcgm(EXPO)
    dcgm_names = {
        s.name + ("_total" if s.name in ("sidecar_gpu_energy_joules", "sidecar_gpu_ecc_errors") else "")
        for s in dcgm.samples
    }
    shared = {
        "sidecar_gpu_utilization_ratio",
        "sidecar_gpu_memory_used_bytes",
        "sidecar_gpu_power_draw_watts",
        "sidecar_gpu_temperature_celsius",
        "sidecar_gpu_sm_clock_hertz",
        "sidecar_gpu_energy_joules_total",
        "sidecar_gpu_throttle_active",
        "sidecar_gpu_ecc_errors_total",
        "sidecar_gpu_pcie_throughput_bytes_per_second",
        "sidecar_gpu_up",
        "sidecar_gpu_info",
    }
    assert shared <= nvml_names
    assert shared <= dcgm_names
    for s in dcgm.samples:
        assert {"gpu", "uuid", "name"} <= {k for k, _ in s.labels}


async def test_failed_scrapes_are_counted_and_old_data_goes_stale() -> None:
    rig = Rig()
    await rig.source.scrape_once()
    rig.status = 503
    rig.clock.advance(15)
    assert await rig.source.scrape_once() == 0
    assert rig.value("sidecar_gpu_dcgm_scrape_errors_total", reason="http_status") == 1
    assert rig.value("sidecar_gpu_temperature_celsius", **l0()) == 47  # still within stale_after_secs
    assert "last scrape failed" in rig.hub.readiness().detail
    rig.clock.advance(50)
    assert rig.value("sidecar_gpu_temperature_celsius", **l0()) is None
    assert rig.value("sidecar_gpu_visible_devices", source="dcgm") is None
    assert rig.hub.gpu_by_uuid() == {}
    await rig.http.aclose()


async def test_connect_errors_and_oversized_expositions_are_refused_and_counted() -> None:
    def refuse(req: httpx.Request) -> httpx.Response:
        raise httpx.ConnectError("connection refused", request=req)

    rig = Rig(httpx.MockTransport(refuse))
    assert await rig.source.scrape_once() == 0
    assert rig.value("sidecar_gpu_dcgm_scrape_errors_total", reason="connect") == 1
    await rig.http.aclose()

    big = Rig(max_body_bytes=1000)
    assert await big.source.scrape_once() == 0
    assert big.value("sidecar_gpu_dcgm_scrape_errors_total", reason="too_large") == 1
    assert big.value("sidecar_gpu_visible_devices", source="dcgm") is None
    await big.http.aclose()


async def test_duplicate_series_after_mapping_are_dropped_and_counted() -> None:
    line = EXPO.splitlines()[2]  # one DCGM_FI_DEV_SM_CLOCK sample
    rig = Rig()
    rig.body = f"{line}\n{line}\n"
    await rig.source.scrape_once()
    assert rig.value("sidecar_gpu_sm_clock_hertz", **l0()) == pytest.approx(1.41e9)
    assert rig.value("sidecar_gpu_series_dropped_total", source="dcgm", reason="duplicate") == 1
    await rig.http.aclose()
