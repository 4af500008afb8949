"""The cold-start watch against a real Triton 2.51 (CPU) in explicit model-control mode."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from prometheus_client import CollectorRegistry
from triton_verdicts_live import infer, start_server

from sidecar.alerting.render import finding_text
from sidecar.checks.cold_start.check import ColdStartWatch
from sidecar.checks.cold_start.config import ColdStartConfig
from sidecar.clock import SystemClock
from sidecar.component import Bus
from sidecar.demo.tritonserver import TritonServer
from sidecar.sources.triton_model_api import TritonModelApiSource

pytestmark = pytest.mark.triton


@pytest.fixture(scope="module")
def slow_triton(tmp_path_factory: pytest.TempPathFactory) -> Iterator[TritonServer]:
    server = start_server(tmp_path_factory.mktemp("triton-slow"))
    try:
        yield server
    finally:
        server.stop()


async def test_a_slow_load_and_slow_first_requests_are_found(slow_triton: TritonServer, tmp_path: Path) -> None:
    registry, clock = CollectorRegistry(), SystemClock()
    bus = Bus(registry)
    watch = ColdStartWatch(
        ColdStartConfig(enabled=True, max_load_secs=2.0, first_requests=3, slowdown_factor=3.0), registry=registry
    )
    bus.subscribe("samples", watch.name, watch.observe)
    async with httpx.AsyncClient() as http:
        src = TritonModelApiSource(
            triton_http_url=slow_triton.http_url,
            interval_secs=1,
            timeout_secs=10,
            max_models=10,
            config_refresh_secs=300,
            registry=registry,
            clock=clock,
            http=http,
            bus=bus,
        )
        await src.poll_once()  # the starting point: "slow" is in the repository, not loaded
        load = asyncio.create_task(http.post(f"{slow_triton.http_url}/v2/repository/models/slow/load", timeout=120))
        # Triton 2.51 holds an index request that arrives at the very instant a load begins until the load
        # ends (seen here: 4.9 s), so the sidecar's first poll must not race the load request.
        await asyncio.wait({load}, timeout=0.3)
        while not load.done():  # poll as the sidecar does while Triton loads (initialize() sleeps 3 s)
            await src.poll_once()
            await asyncio.wait({load}, timeout=0.5)
        assert (await load).status_code == 200
        await src.poll_once()
        (f,) = [f for f in watch.evaluate(clock.now()) if f.check == "cold_start_load"]
        assert f.active and 2.0 < (f.value or 0) < 60, f
        summary = finding_text(f)[0]
        assert summary.startswith("slow v1 took ") and summary.endswith("to load (bound 2s)")

        for _ in range(3):  # the first three executions sleep 0.3 s each
            assert await asyncio.to_thread(infer, slow_triton) == 200
        await src.poll_once()
        for _ in range(4):
            for _ in range(5):
                assert await asyncio.to_thread(infer, slow_triton) == 200
            await src.poll_once()
        (f,) = [f for f in watch.evaluate(clock.now()) if f.check == "cold_start_first_requests"]
        assert f.active and (f.value or 0) >= 0.3, f
        assert f.baseline is not None and f.baseline < 0.1
        assert "first 3 requests" in finding_text(f)[0]
        assert (
            registry.get_sample_value(
                "sidecar_cold_start_first_requests_slowdown_ratio", {"model": "slow", "version": "1"}
            )
            or 0
        ) > 3
        await http.post(f"{slow_triton.http_url}/v2/repository/models/slow/unload", timeout=60)


async def test_a_load_is_timed_even_when_triton_holds_the_first_poll(slow_triton: TritonServer) -> None:
    """The poll goes out with the load request, as it may in production: Triton then either answers LOADING or
    holds the index request until the load ends (Triton 2.51); the slow load is found either way."""
    registry, clock = CollectorRegistry(), SystemClock()
    bus = Bus(registry)
    watch = ColdStartWatch(ColdStartConfig(enabled=True, max_load_secs=2.0), registry=registry)
    bus.subscribe("samples", watch.name, watch.observe)
    async with httpx.AsyncClient() as http:
        src = TritonModelApiSource(
            triton_http_url=slow_triton.http_url,
            interval_secs=1,
            timeout_secs=30,
            max_models=10,
            config_refresh_secs=300,
            registry=registry,
            clock=clock,
            http=http,
            bus=bus,
        )
        await src.poll_once()
        load = asyncio.create_task(http.post(f"{slow_triton.http_url}/v2/repository/models/slow/load", timeout=120))
        while not load.done():
            await src.poll_once()
            await asyncio.wait({load}, timeout=0.5)
        assert (await load).status_code == 200
        await src.poll_once()
        (f,) = [f for f in watch.evaluate(clock.now()) if f.check == "cold_start_load"]
        assert f.active and 2.0 < (f.value or 0) < 60, f
        assert " to load (bound 2s)" in finding_text(f)[0]
        await http.post(f"{slow_triton.http_url}/v2/repository/models/slow/unload", timeout=60)
