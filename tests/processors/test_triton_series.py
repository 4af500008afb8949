"""The Triton source publishes each scrape whole on the bus; the SLI processor derives from what it receives."""

from __future__ import annotations

import dataclasses

import httpx
import pytest
from prometheus_client import CollectorRegistry

from sidecar.clock import FakeClock
from sidecar.component import Bus
from sidecar.model import Batch, SeriesSnapshot
from sidecar.sources.triton_config import TritonConfig
from sidecar.wiring.triton import triton_pair

EXPO = (
    'nv_inference_request_success{model="m",version="1"} %d\n'
    'nv_inference_count{model="m",version="1"} %d\n'
    'nv_inference_exec_count{model="m",version="1"} %d\n'
)


async def test_a_scrape_is_published_as_one_frozen_snapshot_and_a_failure_as_an_empty_view() -> None:
    reg, clock = CollectorRegistry(), FakeClock()
    bus = Bus(reg)
    seen: list[Batch] = []
    answers = [
        httpx.Response(200, text=EXPO % (10, 10, 10)),
        httpx.Response(500),
        httpx.Response(200, text=EXPO % (30, 30, 30)),
    ]
    http = httpx.AsyncClient(transport=httpx.MockTransport(lambda r: answers.pop(0)))
    bus.subscribe("scrapes", "spy", seen.append)
    _, src = triton_pair(TritonConfig(metrics_url="http://t/metrics"), registry=reg, clock=clock, http=http, bus=bus)
    assert await src.scrape_once()
    snap = seen[-1].items[0]
    assert isinstance(snap, SeriesSnapshot) and seen[-1].complete and len(snap.samples) == 3
    assert snap.labels(snap.samples[0][1]) == {"model": "m", "version": "1"}
    with pytest.raises(dataclasses.FrozenInstanceError):
        snap.samples = ()  # type: ignore[misc]
    with pytest.raises(TypeError):
        snap.parsed["x"] = {}  # type: ignore[index]

    clock.advance(5)
    assert not await src.scrape_once()
    assert seen[-1].items == () and seen[-1].complete  # the view is unknown: derived values withdrawn
    assert reg.get_sample_value("sidecar_model_requests_per_second", {"model": "m", "version": "1"}) is None

    clock.advance(5)
    assert await src.scrape_once()
    # 20 requests over the 10 s since the last good scrape.
    rate = reg.get_sample_value("sidecar_model_requests_per_second", {"model": "m", "version": "1"})
    assert rate == pytest.approx(2.0)
    await http.aclose()


def test_the_processor_ignores_other_sources_samples() -> None:
    reg, clock = CollectorRegistry(), FakeClock()
    bus = Bus(reg)
    series, _ = triton_pair(TritonConfig(), registry=reg, clock=clock, bus=bus, http=httpx.AsyncClient())
    series.deriver.fresh = True
    bus.publish(Batch(kind="scrapes", source="other", items=(), complete=True))  # another target's failed scrape
    assert series.deriver.fresh
