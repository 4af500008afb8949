"""The dcgm-exporter source's loop: a scrape that fails in a way nobody foresaw is counted, and the loop goes on."""

from __future__ import annotations

import httpx
from prometheus_client import CollectorRegistry

from sidecar.clock import FakeClock
from sidecar.polled import ManualTicker
from sidecar.sources.gpu.config import GpuConfig
from sidecar.sources.gpu.dcgm import DcgmSource
from sidecar.state.gpus import GpuHub


def _boom(request: httpx.Request) -> httpx.Response:
    raise RuntimeError("a transport bug, not an httpx error")


async def test_an_unexpected_scrape_failure_moves_a_counter() -> None:
    reg = CollectorRegistry()
    clock = FakeClock()
    cfg = GpuConfig.model_validate({"nvml": {"enabled": False}, "dcgm": {"enabled": True}})
    hub = GpuHub(registry=reg, clock=clock, max_series=cfg.max_series, stale_after_secs=cfg.stale_after_secs)
    async with httpx.AsyncClient(transport=httpx.MockTransport(_boom)) as http:
        source = DcgmSource(cfg.dcgm, hub=hub, registry=reg, clock=clock, http=http, ticker=ManualTicker)

        def crashes() -> float:
            return reg.get_sample_value("sidecar_component_crashes_total", {"component": source.name}) or 0.0

        await source.start()
        try:
            assert isinstance(source.ticker, ManualTicker) and source.ticker.running
            await source.ticker.tick()  # the loop's run, without a timer: the failure is counted, not raised
            await source.ticker.tick()
        finally:
            await source.shutdown()
        assert crashes() == 2
        assert not source.ticker.running
