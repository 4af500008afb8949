"""The GPU area in the real service: no-GPU behaviour on this machine for real, config errors, promtool."""

from __future__ import annotations

import asyncio
import logging
import shutil
import subprocess
from pathlib import Path

import httpx
import pynvml
import pytest
from gpu_fake_nvml import GIB, FakeGpu, make_rig
from prometheus_client import generate_latest

from sidecar.app import create_app
from sidecar.clock import FakeClock
from sidecar.config import parse_config
from sidecar.errors import ConfigError
from sidecar.service import Service
from sidecar.sources.gpu.dcgm import DcgmSource
from sidecar.store import Store
from sidecar.wiring.gpu import build as build_gpu

EXPO = (Path(__file__).resolve().parents[1] / "data" / "gpu" / "dcgm-exporter-3.3.txt").read_text()


def _machine_has_nvml() -> bool:
    try:
        pynvml.nvmlInit()
    except pynvml.NVMLError:
        return False
    pynvml.nvmlShutdown()
    return True


async def test_without_a_gpu_the_sidecar_starts_says_so_and_exports_no_gpu_series(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    if _machine_has_nvml():
        pytest.skip("this machine has an NVIDIA driver; the no-GPU path is exercised on CPU-only machines")
    store = Store(tmp_path / "state.sqlite")
    service = Service(
        parse_config({"gpu": {"nvml": {"interval_secs": 0.05}}}),
        clock=FakeClock(),
        store=store,
        factories=[build_gpu],
    )
    app = create_app(service, manage_lifecycle=False)
    with caplog.at_level(logging.INFO, logger="sidecar"):
        await service.start()
        try:
            loop = asyncio.get_running_loop()
            deadline = loop.time() + 10
            # real libnvidia-ml lookup, real failure; several sampling ticks pass (interval 0.05 s)
            while (service.registry.get_sample_value("sidecar_gpu_snapshots_total", {"source": "nvml"}) or 0) < 4:
                assert loop.time() < deadline, "the NVML source did not tick"
                await asyncio.sleep(0.02)
            async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://sidecar") as c:
                ready = await c.get("/readyz")
                metrics = (await c.get("/metrics")).text
        finally:
            await service.shutdown()
    assert ready.status_code == 200  # a CPU-only deployment is valid
    assert "no GPU visible" in ready.json()["components"]["gpu"]
    assert 'sidecar_gpu_visible_devices{source="nvml"} 0.0' in metrics
    assert "uuid=" not in metrics  # no per-GPU series, no fabricated zeros
    gpu_logs = [r for r in caplog.records if r.name.startswith("sidecar.gpu")]
    assert len(gpu_logs) == 1, [r.getMessage() for r in gpu_logs]
    assert "no GPU is visible" in gpu_logs[0].getMessage()
    assert service.component("gpu").gpu_by_uuid() == {}  # type: ignore[attr-defined]


def test_config_errors_name_the_field() -> None:
    with pytest.raises(ConfigError) as e:
        parse_config({"gpu": {"stale_after_secs": 5, "nvml": {"interval_secs": 10}}})
    assert e.value.path == "gpu.stale_after_secs"
    assert "gpu.nvml.interval_secs" in e.value.message
    with pytest.raises(ConfigError) as e:
        parse_config({"gpu": {"dcgm": {"enabled": True, "interval_secs": 90}}})
    assert e.value.path == "gpu.stale_after_secs"
    with pytest.raises(ConfigError) as e:
        parse_config({"gpu": {"nvml": {"sample_secs": 1}}})
    assert e.value.path == "gpu.nvml.sample_secs" and e.value.message == "unknown key"
    with pytest.raises(ConfigError) as e:
        parse_config({"gpu": {"dcgm": {"timeout_secs": 0}}})
    assert e.value.path == "gpu.dcgm.timeout_secs"


def test_factory_builds_what_is_enabled(tmp_path: Path) -> None:
    store = Store(tmp_path / "s.sqlite")
    off = Service(parse_config({"gpu": {"enabled": False}}), store=store, factories=[build_gpu])
    assert off.components == []
    both = Service(parse_config({"gpu": {"dcgm": {"enabled": True}}}), store=store, factories=[build_gpu])
    assert [c.name for c in both.components] == ["gpu", "gpu_nvml", "gpu_dcgm"]
    assert both.readiness()[0] is True


@pytest.mark.prometheus
async def test_the_whole_gpu_exposition_passes_promtool() -> None:
    promtool = shutil.which("promtool")
    if promtool is None:
        pytest.skip("promtool is not installed")
    rig = make_rig(
        [
            FakeGpu("GPU-a", processes=[(7, GIB), (8, None)]),
            FakeGpu("GPU-b", errors={"nvmlDeviceGetTotalEccErrors": pynvml.NVML_ERROR_NOT_SUPPORTED}),
        ],
        processes={7: "tritonserver"},
        gpu_config={"dcgm": {"enabled": True}},
    )
    rig.nvml.xid(0, 79)
    rig.source.sample_once()
    rig.source.sample_once()
    async with httpx.AsyncClient(transport=httpx.MockTransport(lambda r: httpx.Response(200, text=EXPO))) as http:
        cfg = parse_config({"gpu": {"dcgm": {"enabled": True, "url": "http://dcgm/metrics"}}}).gpu.dcgm
        await DcgmSource(cfg, hub=rig.hub, registry=rig.registry, clock=rig.clock, http=http).scrape_once()
    text = generate_latest(rig.registry)
    assert b"sidecar_gpu_xid_errors_total" in text and b'source="dcgm"' in text
    res = subprocess.run([promtool, "check", "metrics"], input=text, capture_output=True, timeout=30)
    assert res.returncode == 0, res.stdout.decode() + res.stderr.decode()
    assert res.stdout.strip() == b"" and res.stderr.strip() == b"", (res.stdout + res.stderr).decode()
