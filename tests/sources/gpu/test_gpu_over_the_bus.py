"""In the service the GPU sources never touch the GPU state: their snapshots travel as GpuSnapshot batches."""

from __future__ import annotations

from pathlib import Path

import httpx
from prometheus_client import CollectorRegistry

from sidecar.clock import FakeClock
from sidecar.config import parse_config
from sidecar.model import Batch, GpuSnapshot
from sidecar.service import Service
from sidecar.store import Store
from sidecar.wiring.gpu import build as gpu_build

EXPO = (Path(__file__).resolve().parents[2] / "data" / "gpu" / "dcgm-exporter-3.3.txt").read_text()


async def test_dcgm_snapshots_reach_the_gpu_state_over_the_bus() -> None:
    status = [200]
    http = httpx.AsyncClient(transport=httpx.MockTransport(lambda r: httpx.Response(status[0], text=EXPO)))
    cfg = parse_config(
        {
            "gpu": {
                "enabled": True,
                "nvml": {"enabled": False},
                "dcgm": {"enabled": True, "url": "http://dcgm:9400/metrics"},
            }
        }
    )
    reg = CollectorRegistry()
    svc = Service(cfg, clock=FakeClock(), http=http, registry=reg, store=Store(":memory:"), factories=[gpu_build])
    seen: list[Batch] = []
    svc.bus.subscribe("gpu_snapshots", "spy", seen.append)
    try:
        assert await svc.component("gpu_dcgm").scrape_once() > 0
        snap = seen[-1].items[0]
        assert seen[-1].source == "dcgm" and isinstance(snap, GpuSnapshot) and snap.visible == 2
        assert reg.get_sample_value("sidecar_gpu_visible_devices", {"source": "dcgm"}) == 2
        # The source announced itself when built, then sent one snapshot.
        assert reg.get_sample_value("sidecar_bus_items_total", {"kind": "gpu_snapshots", "source": "dcgm"}) == 2
        status[0] = 503  # a failed scrape sends only its reason: readiness says it, the data stays until stale
        await svc.component("gpu_dcgm").scrape_once()
        assert seen[-1].items[0].sampled is False
        assert "503" in (svc.component("gpu").readiness().detail or "")
        assert reg.get_sample_value("sidecar_gpu_visible_devices", {"source": "dcgm"}) == 2
    finally:
        await http.aclose()
