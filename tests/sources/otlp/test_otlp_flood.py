"""Finding 1 of the security review, reproduced in-process: a flood of span batches with large attribute values
used to take the process over ``server.memory_limit_mib``, after which every push (events and changes too)
got 503 until a restart, and no trace was ever evicted.

Here the resident memory is a fake that follows what the trace store holds (``base + store bytes``, plus memory
the stores cannot give back where a test says so), so the tests are exact and fast: the store's byte budget
holds a flood under a roomy limit; under a tight one the memory limiter sheds the store and holds its budget
down instead of refusing, and gives it back when there is room; events and changes are never refused; and
when memory the stores cannot free keeps the process over the limit, only concurrent pushes are refused, and
for a few ticks of an injected clock after it is handed back, not until a restart.
"""

from __future__ import annotations

import math
import random
from pathlib import Path
from typing import Any

import httpx
import orjson
from prometheus_client import CollectorRegistry

from sidecar.app import create_app
from sidecar.clock import FakeClock
from sidecar.config import parse_config
from sidecar.service import Service
from sidecar.store import Store
from sidecar.wiring.alerting import build as alerting_build
from sidecar.wiring.events import build as events_build
from sidecar.wiring.traces import build as traces_build

NOW = 1_700_000_000.0
MIB = 1024 * 1024
BASE_RSS = 100 * MIB
STORE_MIB = 4
# A tight limit sits below base + a full store, as in the finding (the store alone could pass it).
TIGHT_MIB = 100 + 3
ROOMY_MIB = 100 + 8
RELIEF_SECS = 5.0
BATCHES = 95
JS = {"content-type": "application/json"}


def _batch(rnd: random.Random, spans: int = 20, traces: int = 4, attrs: int = 8, chars: int = 4000) -> bytes:
    """One OTLP JSON body of ``spans`` spans over ``traces`` traces, each span with ``attrs`` values of
    ``chars`` characters (the finding's shape, scaled from 3.2 MB to ~0.65 MB a body)."""
    tids = [rnd.randbytes(16).hex() for _ in range(traces)]
    out = []
    for i in range(spans):
        values = [
            {"key": f"payload.{j}", "value": {"stringValue": rnd.randbytes(chars // 2 + 1).hex()[:chars]}}
            for j in range(attrs)
        ]
        out.append(
            {
                "traceId": tids[i % traces],
                "spanId": rnd.randbytes(8).hex(),
                "name": "flood",
                "startTimeUnixNano": str(1_700_000_000_000_000_000 + i),
                "endTimeUnixNano": str(1_700_000_000_000_001_000 + i),
                "attributes": values,
            }
        )
    return orjson.dumps({"resourceSpans": [{"scopeSpans": [{"spans": out}]}]})


class Memory:
    """The fake resident size: a base, the trace store's bytes, and ``other`` bytes the stores cannot free;
    ``trim`` (the limiter's malloc_trim) hands ``other`` back when ``trim_frees`` says so."""

    def __init__(self) -> None:
        self.other = 0
        self.trim_frees = False
        self.store_bytes = lambda: 0

    def rss(self) -> int:
        return BASE_RSS + self.store_bytes() + self.other

    def trim(self) -> None:
        if self.trim_frees:
            self.other = 0


def _service(tmp_path: Path, clock: FakeClock, limit_mib: int) -> tuple[Service, Any, Memory]:
    cfg = parse_config(
        {
            "server": {"memory_limit_mib": limit_mib, "memory_relief_interval_secs": RELIEF_SECS},
            "traces": {"enabled": True, "store": {"max_bytes_mib": STORE_MIB, "max_trace_bytes_mib": 1}},
            "alerting": {"enabled": True},
        }
    )
    svc = Service(
        cfg,
        clock=clock,
        registry=CollectorRegistry(),
        store=Store(tmp_path / "s.sqlite"),
        http=httpx.AsyncClient(transport=httpx.MockTransport(lambda r: httpx.Response(200))),
        factories=[traces_build, events_build, alerting_build],
    )
    hub = next(c for c in svc.components if c.name == "traces")
    mem = Memory()
    mem.store_bytes = lambda: hub.store.nbytes
    svc.guard.admission._rss = mem.rss
    svc.guard.admission._trim = mem.trim
    return svc, hub, mem


def _value(svc: Service, name: str, labels: dict[str, str] | None = None) -> float:
    return svc.registry.get_sample_value(name, labels or {}) or 0.0


def _refused(svc: Service, endpoint: str) -> float:
    """Every refusal of ``endpoint``, whatever the reason."""
    total = 0.0
    for metric in svc.registry.collect():
        if metric.name == "sidecar_http_refused":
            for s in metric.samples:
                if s.name.endswith("_total") and s.labels["endpoint"] == endpoint:
                    total += s.value
    return total


async def _events_and_changes(c: httpx.AsyncClient, i: int) -> None:
    ev = await c.post("/v1/events", json={"model": "m", "timestamp": NOW, "features": {"x": float(i)}})
    assert ev.status_code == 200, ev.text
    ch = await c.post("/v1/changes", json={"what": f"deploy {i}", "model": "m"})
    assert ch.status_code in (200, 201), ch.text


def _client(svc: Service) -> httpx.AsyncClient:
    app = create_app(svc, manage_lifecycle=False)
    return httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://sc")


async def test_under_a_roomy_limit_the_store_budget_evicts_a_flood_and_nothing_is_refused(tmp_path: Path) -> None:
    clock = FakeClock(NOW)
    svc, hub, _ = _service(tmp_path, clock, ROOMY_MIB)
    rnd = random.Random(1)
    peak = 0
    async with _client(svc) as c:
        for i in range(BATCHES):
            r = await c.post("/v1/traces", content=_batch(rnd), headers=JS)
            assert r.status_code == 200, (i, r.text)
            peak = max(peak, hub.store.nbytes)
            assert hub.store.nbytes <= STORE_MIB * MIB
            if i % 10 == 0:
                await _events_and_changes(c, i)
            clock.advance(0.1)
    assert peak > STORE_MIB * MIB * 0.9  # the flood filled the store: ~62 MB were posted
    assert _value(svc, "sidecar_traces_evicted_total", {"reason": "bytes_plain"}) > 0
    assert _value(svc, "sidecar_traces_stored_bytes") == hub.store.nbytes
    assert _value(svc, "sidecar_memory_reliefs_total") == 0
    for endpoint in ("otlp_traces", "/v1/events", "changes"):
        assert _refused(svc, endpoint) == 0, endpoint


async def test_under_a_tight_limit_the_flood_is_shed_and_held_down_without_refusing_then_given_room_back(
    tmp_path: Path,
) -> None:
    clock = FakeClock(NOW)
    svc, hub, mem = _service(tmp_path, clock, TIGHT_MIB)
    adm = svc.guard.admission
    rnd = random.Random(1)
    limit = TIGHT_MIB * MIB
    worst_after_relief = 0
    async with _client(svc) as c:
        for i in range(BATCHES):
            r = await c.post("/v1/traces", content=_batch(rnd), headers=JS)
            assert r.status_code == 200, (i, r.text)
            if _value(svc, "sidecar_memory_reliefs_total"):
                worst_after_relief = max(worst_after_relief, mem.rss())
            if i % 10 == 0:
                await _events_and_changes(c, i)
            clock.advance(0.1)
        assert _value(svc, "sidecar_memory_reliefs_total") >= 1
        assert _value(svc, "sidecar_traces_evicted_total", {"reason": "memory_pressure"}) > 0
        assert hub.store.budget < STORE_MIB * MIB
        assert _value(svc, "sidecar_traces_store_budget_bytes") == hub.store.budget
        # Held down, the store no longer refills past the limit: at most one batch (~0.65 MB) over it.
        assert worst_after_relief <= limit + MIB
        # A concurrent span push is taken: the process is not over its limit.
        adm._inflight["otlp_traces"] = 1
        assert (await c.post("/v1/traces", content=_batch(rnd, spans=1), headers=JS)).status_code == 200
        adm._inflight["otlp_traces"] = 0
        # The flood has stopped: pushes keep coming (an event a second); the budget grows back by half the
        # headroom every relief interval until the store has its configured size again.
        ticks = 0
        while hub.store.budget < STORE_MIB * MIB:
            ticks += 1
            assert ticks < 120
            clock.advance(1.0)
            await _events_and_changes(c, 1000 + ticks)
    assert _value(svc, "sidecar_memory_pressure") == 0
    for endpoint in ("otlp_traces", "/v1/events", "changes"):
        assert _refused(svc, endpoint) == 0, endpoint
    assert ticks <= 60  # 37 ticks of 1 s here: the budget grows back in steps, one per relief interval


async def test_memory_the_stores_cannot_free_refuses_only_concurrent_pushes_and_only_until_it_is_handed_back(
    tmp_path: Path,
) -> None:
    clock = FakeClock(NOW)
    svc, _, mem = _service(tmp_path, clock, TIGHT_MIB)
    adm = svc.guard.admission
    rnd = random.Random(2)
    async with _client(svc) as c:
        for _ in range(30):
            assert (await c.post("/v1/traces", content=_batch(rnd), headers=JS)).status_code == 200
            clock.advance(0.1)
        # The flood left 8 MiB on the heap that no store holds (fragments, say): shedding cannot get under.
        mem.other = 8 * MIB
        # A slow span push holds the endpoint's slot: a second is refused, counted, with a Retry-After; events
        # and changes, with endpoints of their own, still pass, one at a time.
        adm._inflight["otlp_traces"] = 1
        r = await c.post("/v1/traces", content=_batch(rnd), headers=JS)
        assert r.status_code == 503 and r.headers["retry-after"] == str(math.ceil(RELIEF_SECS))
        assert _value(svc, "sidecar_http_refused_total", {"endpoint": "otlp_traces", "reason": "memory_limit"}) == 1
        assert _value(svc, "sidecar_memory_pressure") == 1
        await _events_and_changes(c, 1)
        # The flood has stopped and the heap can be handed back: tick a second at a time until a concurrent span
        # push is taken again.
        mem.trim_frees = True
        ticks = 0
        while True:
            ticks += 1
            clock.advance(1.0)
            r = await c.post("/v1/traces", content=_batch(rnd, spans=1, attrs=1, chars=10), headers=JS)
            if r.status_code == 200:
                break
            assert r.status_code == 503 and ticks < 60
        adm._inflight["otlp_traces"] = 0
    # Recovered at the next relief (not "until restart"): 3 ticks of 1 s here, at most the relief interval.
    assert 1 <= ticks <= math.ceil(RELIEF_SECS)
    assert _value(svc, "sidecar_memory_pressure") == 0
    assert _refused(svc, "/v1/events") == 0 and _refused(svc, "changes") == 0
