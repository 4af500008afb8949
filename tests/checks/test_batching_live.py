"""The batching advisor against a real Triton 2.51 (CPU): the demo ``ctr`` model's real config and counters."""

from __future__ import annotations

import asyncio

import httpx
import pytest
from prometheus_client import CollectorRegistry

from sidecar.alerting.render import finding_text
from sidecar.checks.batching.check import BatchingAdvisor
from sidecar.checks.batching.config import BatchingConfig
from sidecar.clock import FakeClock
from sidecar.component import Bus
from sidecar.demo.tritonserver import TritonServer
from sidecar.sources.triton_model_api import TritonModelApiSource

pytestmark = pytest.mark.triton


def infer_ctr(server: TritonServer, n: int) -> None:
    body = {"inputs": [{"name": "x", "shape": [1, 4], "datatype": "FP32", "data": [1, 2, 3, 4]}]}
    with httpx.Client() as c:
        for _ in range(n):
            assert c.post(f"{server.http_url}/v2/models/ctr/versions/2/infer", json=body, timeout=30).status_code == 200


async def test_one_request_at_a_time_waits_the_whole_delay_for_nothing(demo_triton: TritonServer) -> None:
    registry, clock = CollectorRegistry(), FakeClock()
    bus = Bus(registry)
    # An accepted wait of 1 ms: under 1000 requests/s it gathers not one more request, and the demo's delay
    # (2000 us, from its config.pbtxt) is above it.
    advisor = BatchingAdvisor(
        BatchingConfig(enabled=True, window_secs=600, min_requests=20, max_suggested_delay_us=1000), registry=registry
    )
    bus.subscribe("samples", advisor.name, advisor.observe)
    async with httpx.AsyncClient() as http:
        src = TritonModelApiSource(
            triton_http_url=demo_triton.http_url,
            interval_secs=1,
            timeout_secs=10,
            max_models=50,
            config_refresh_secs=300,
            registry=registry,
            clock=clock,
            http=http,
            bus=bus,
        )
        assert await src.poll_once()
        await asyncio.to_thread(infer_ctr, demo_triton, 40)
        clock.advance(10)
        assert await src.poll_once()
    assert advisor.configs["ctr"]["max_queue_delay_us"] == 2000  # read from GET /v2/models/ctr/config
    (f,) = [f for f in advisor.evaluate(clock.now()) if f.labels == {"model": "ctr", "version": "2"}]
    assert f.active and f.facts["verdict"] == "too_long", f.facts
    assert f.facts["requests"] == 40 and f.facts["fill"] == 1.0
    assert float(f.facts["queue_us"] or 0) >= 1000  # each request waited (at least half) the delay
    summary, description = finding_text(f)
    assert summary == "ctr v2: max_queue_delay_microseconds 2000 too long, try 0", summary
    assert "40 inferences at 4/s, 1.00 per execution (target batch 16, max_batch_size 16)" in description
