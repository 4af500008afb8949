"""Admission per push endpoint (in-flight requests and body bytes) and the memory limiter that evicts before it
refuses: one endpoint's load never takes another's capacity, and over the memory limit no endpoint is shut."""

from __future__ import annotations

from contextlib import AsyncExitStack
from pathlib import Path

import httpx
import pytest
from fastapi import HTTPException
from prometheus_client import CollectorRegistry

from sidecar.app import create_app
from sidecar.clock import FakeClock
from sidecar.config import parse_config
from sidecar.httpguard import RequestGuard
from sidecar.service import Service
from sidecar.store import Store
from sidecar.wiring.alerting import build as alerting_build
from sidecar.wiring.events import build as events_build

MIB = 1024 * 1024


class Memory:
    """A fake resident size, a fake clock and relief hooks that free what they are told to."""

    def __init__(self, rss: int) -> None:
        self.rss = rss
        self.now = 0.0
        self.reliefs = 0
        self.trims = 0

    def relieve(self, frees: int) -> int:
        self.reliefs += 1
        self.rss -= frees
        return frees


def _guard(reg: CollectorRegistry, mem: Memory | None = None, **kw: int) -> RequestGuard:
    mem = mem or Memory(0)
    g = RequestGuard(
        reg,
        max_body_bytes=kw.pop("max_body_bytes", 1 * MIB),
        max_inflight=kw.pop("max_inflight", 4),
        max_inflight_bytes=kw.pop("max_inflight_bytes", 2 * MIB),
        memory_limit_bytes=kw.pop("memory_limit_bytes", 0) or None,
        memory_relief_interval_secs=5.0,
        clock=lambda: mem.now,
        rss=lambda: mem.rss,
    )
    g.admission._trim = lambda: setattr(mem, "trims", mem.trims + 1)
    return g


def _refused(reg: CollectorRegistry, endpoint: str, reason: str) -> float:
    return reg.get_sample_value("sidecar_http_refused_total", {"endpoint": endpoint, "reason": reason}) or 0.0


async def test_one_endpoint_at_its_inflight_limit_leaves_the_others_open() -> None:
    reg = CollectorRegistry()
    g = _guard(reg, max_inflight=2)
    async with AsyncExitStack() as stack:
        for _ in range(2):
            await stack.enter_async_context(g.admit("otlp_traces"))
        with pytest.raises(HTTPException) as err:
            await stack.enter_async_context(g.admit("otlp_traces"))
        assert err.value.status_code == 429 and err.value.headers == {"Retry-After": "1"}
        async with g.admit("/v1/events"), g.admit("changes"):
            assert g.admission.inflight("/v1/events") == 1 and g.admission.inflight("otlp_traces") == 2
    assert _refused(reg, "otlp_traces", "overloaded") == 1 and _refused(reg, "/v1/events", "overloaded") == 0
    assert g.admission.inflight("otlp_traces") == 0
    assert reg.get_sample_value("sidecar_http_inflight_requests") == 0


async def test_body_bytes_in_flight_are_budgeted_per_endpoint_and_released() -> None:
    reg = CollectorRegistry()
    g = _guard(reg, max_inflight_bytes=2 * MIB)
    adm = g.admission
    async with g.admit("otlp_traces"):
        adm.reserve("otlp_traces", 1536 * 1024)
        async with g.admit("otlp_traces"):
            with pytest.raises(HTTPException) as err:
                adm.reserve("otlp_traces", 1 * MIB)
            assert err.value.status_code == 429 and err.value.headers == {"Retry-After": "1"}
        # Another endpoint's budget is its own.
        async with g.admit("/v1/events"):
            adm.reserve("/v1/events", 2 * MIB)
            assert adm.inflight_bytes("/v1/events") == 2 * MIB
        assert reg.get_sample_value("sidecar_http_inflight_bytes", {"endpoint": "otlp_traces"}) == 1536 * 1024
    assert adm.inflight_bytes("otlp_traces") == 0 and adm.inflight_bytes("/v1/events") == 0
    assert _refused(reg, "otlp_traces", "inflight_bytes") == 1


async def test_a_request_alone_on_its_endpoint_is_never_refused_for_bytes() -> None:
    g = _guard(CollectorRegistry(), max_inflight_bytes=1 * MIB)
    async with g.admit("otlp_traces"):
        g.admission.reserve("otlp_traces", 1 * MIB)
        g.admission.reserve("otlp_traces", 1 * MIB)  # the decompressed body on top of the raw one
        assert g.admission.inflight_bytes("otlp_traces") == 2 * MIB


async def test_over_the_memory_limit_the_stores_evict_first_and_nothing_is_refused_when_that_suffices() -> None:
    reg = CollectorRegistry()
    mem = Memory(600 * MIB)
    g = _guard(reg, mem, memory_limit_bytes=512 * MIB)
    g.admission.on_memory_pressure("traces", lambda: mem.relieve(200 * MIB))
    async with g.admit("otlp_traces"), g.admit("otlp_traces"):
        pass
    assert mem.reliefs == 1 and mem.trims == 1 and mem.rss == 400 * MIB
    assert reg.get_sample_value("sidecar_memory_reliefs_total") == 1
    assert reg.get_sample_value("sidecar_memory_relief_freed_bytes_total", {"store": "traces"}) == 200 * MIB
    assert reg.get_sample_value("sidecar_memory_pressure") == 0
    assert _refused(reg, "otlp_traces", "memory_limit") == 0


async def test_still_over_the_limit_each_endpoint_gets_one_request_at_a_time_and_relief_is_rate_limited() -> None:
    reg = CollectorRegistry()
    mem = Memory(600 * MIB)
    g = _guard(reg, mem, memory_limit_bytes=512 * MIB)
    g.admission.on_memory_pressure("traces", lambda: mem.relieve(10 * MIB))

    def boom() -> int:
        raise RuntimeError("broken store")

    g.admission.on_memory_pressure("broken", boom)
    async with g.admit("otlp_traces"):
        with pytest.raises(HTTPException) as err:
            async with g.admit("otlp_traces"):
                pass
        assert err.value.status_code == 503 and err.value.headers == {"Retry-After": "5"}
        # Events and changes have endpoints of their own: each still gets its one request through.
        async with g.admit("/v1/events"), g.admit("changes"):
            pass
    assert _refused(reg, "otlp_traces", "memory_limit") == 1
    assert _refused(reg, "/v1/events", "memory_limit") == 0 and _refused(reg, "changes", "memory_limit") == 0
    assert reg.get_sample_value("sidecar_memory_pressure") == 1
    # One relief per interval of the injected clock, however many pushes arrive; a failing hook is counted.
    assert mem.reliefs == 1
    assert reg.get_sample_value("sidecar_memory_relief_errors_total", {"store": "broken"}) == 1
    mem.now = 4.9
    async with g.admit("otlp_traces"):
        pass
    assert mem.reliefs == 1
    mem.now = 5.0
    async with g.admit("otlp_traces"):
        pass
    assert mem.reliefs == 2


async def test_under_the_limit_again_held_down_stores_get_headroom_back_once_per_interval() -> None:
    reg = CollectorRegistry()
    mem = Memory(600 * MIB)
    g = _guard(reg, mem, memory_limit_bytes=512 * MIB)
    given: list[int] = []

    def restore(headroom: int) -> bool:
        given.append(headroom)
        return len(given) < 2  # held down after the first, restored after the second

    g.admission.on_memory_pressure("traces", lambda: mem.relieve(200 * MIB), restore)
    async with g.admit("otlp_traces"):
        pass
    assert mem.rss == 400 * MIB and given == []  # the relief itself gives nothing back
    mem.now = 1.0
    async with g.admit("otlp_traces"):
        pass
    assert given == [112 * MIB]
    mem.now = 5.9
    async with g.admit("otlp_traces"):
        pass
    assert given == [112 * MIB]  # once per relief interval
    mem.now = 6.0
    async with g.admit("otlp_traces"):
        pass
    assert given == [112 * MIB, 112 * MIB]
    mem.now = 20.0
    async with g.admit("otlp_traces"):
        pass
    assert len(given) == 2  # every store has its budget back: nothing more to give


async def test_without_a_memory_limit_rss_is_not_read() -> None:
    reads = []
    g = RequestGuard(CollectorRegistry(), max_body_bytes=MIB, rss=lambda: reads.append(1) or 10**12)
    async with g.admit("otlp_traces"), g.admit("otlp_traces"):
        pass
    assert reads == []


async def test_through_the_app_each_push_route_reserves_its_body_on_its_own_endpoint(tmp_path: Path) -> None:
    cfg = parse_config({"server": {"max_body_bytes": MIB, "max_inflight_bytes_mib": 1}, "alerting": {"enabled": True}})
    svc = Service(
        cfg,
        clock=FakeClock(),
        registry=CollectorRegistry(),
        store=Store(tmp_path / "s.sqlite"),
        http=httpx.AsyncClient(transport=httpx.MockTransport(lambda r: httpx.Response(200))),
        factories=[events_build, alerting_build],
    )
    adm = svc.guard.admission
    app = create_app(svc, manage_lifecycle=False)
    event = {"model": "m", "timestamp": 1_700_000_000.0, "features": {"x": 1.0}}
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://sc") as c:
        # As if another push to /v1/events held the endpoint's whole byte budget: this one is refused with 429...
        adm._bytes["/v1/events"] = MIB
        r = await c.post("/v1/events", json=event)
        assert r.status_code == 429 and r.headers["retry-after"] == "1"
        # ...while /v1/changes, whose budget is its own, is taken.
        assert (await c.post("/v1/changes", json={"what": "deploy", "model": "m"})).status_code == 201
        adm._bytes["/v1/events"] = 0
        assert (await c.post("/v1/events", json=event)).status_code == 200
    assert adm.inflight_bytes("/v1/events") == 0 and adm.inflight_bytes("changes") == 0
    assert _refused(svc.registry, "/v1/events", "inflight_bytes") == 1
