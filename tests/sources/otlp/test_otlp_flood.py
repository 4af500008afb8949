"""Finding 1 of the security review, reproduced in-process: a flood of span batches with large attribute values
used to take the process over ``server.memory_limit_mib``, after which every push (events and changes too)
got 503 until a restart, and no trace was ever evicted.

Here the resident memory is a fake that follows what the trace store holds (``base + store bytes``), so the
test is exact and fast: the store's byte budget must hold it, the memory limiter must evict rather than
refuse, events and changes must never be refused, and after the flood the span endpoint must take concurrent
pushes again within a few ticks of an injected clock.
"""

from __future__ import annotations

import math
import random
from pathlib import Path

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
# The process limit sits below base + a full store, as in the finding (the store alone could pass it).
LIMIT_MIB = 100 + 3
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


def _service(tmp_path: Path, clock: FakeClock) -> Service:
    cfg = parse_config(
        {
            "server": {"memory_limit_mib": LIMIT_MIB, "memory_relief_interval_secs": RELIEF_SECS},
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
    # The process's memory as the finding saw it: a base plus what the trace store holds.
    svc.guard.admission._rss = lambda: BASE_RSS + hub.store.nbytes
    return svc


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


async def test_a_span_flood_is_evicted_not_refused_and_never_locks_out_events_or_changes(tmp_path: Path) -> None:
    clock = FakeClock(NOW)
    svc = _service(tmp_path, clock)
    hub = next(c for c in svc.components if c.name == "traces")
    rnd = random.Random(1)
    app = create_app(svc, manage_lifecycle=False)
    peak = 0
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://sc") as c:
        for i in range(BATCHES):
            r = await c.post("/v1/traces", content=_batch(rnd), headers=JS)
            assert r.status_code == 200, (i, r.text)
            peak = max(peak, hub.store.nbytes)
            assert hub.store.nbytes <= STORE_MIB * MIB
            if i % 10 == 0:
                await _events_and_changes(c, i)
            clock.advance(0.1)
    # The flood really was one: it went over the limit, the store's budget and the limiter both evicted.
    assert peak > STORE_MIB * MIB * 0.9
    assert _value(svc, "sidecar_memory_reliefs_total") >= 1
    assert _value(svc, "sidecar_traces_evicted_total", {"reason": "bytes_plain"}) > 0
    assert _value(svc, "sidecar_traces_evicted_total", {"reason": "memory_pressure"}) > 0
    assert _value(svc, "sidecar_memory_relief_freed_bytes_total", {"store": "traces"}) > 0
    assert _value(svc, "sidecar_traces_stored_bytes") == hub.store.nbytes
    # Nothing was refused: not the spans (each alone on its endpoint), not events, not changes.
    for endpoint in ("otlp_traces", "/v1/events", "changes"):
        assert _refused(svc, endpoint) == 0, endpoint


async def test_after_the_flood_concurrent_span_pushes_are_taken_again_within_the_relief_interval(
    tmp_path: Path,
) -> None:
    clock = FakeClock(NOW)
    svc = _service(tmp_path, clock)
    rnd = random.Random(2)
    app = create_app(svc, manage_lifecycle=False)
    adm = svc.guard.admission
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://sc") as c:
        for _ in range(30):
            assert (await c.post("/v1/traces", content=_batch(rnd), headers=JS)).status_code == 200
            clock.advance(0.1)
        # A slow span push holds the endpoint's slot; over the limit a second one is refused, counted, with a
        # Retry-After; events and changes, with endpoints of their own, still pass.
        adm._inflight["otlp_traces"] = 1
        r = await c.post("/v1/traces", content=_batch(rnd), headers=JS)
        assert r.status_code == 503 and r.headers["retry-after"] == str(math.ceil(RELIEF_SECS))
        assert _value(svc, "sidecar_http_refused_total", {"endpoint": "otlp_traces", "reason": "memory_limit"}) == 1
        assert _value(svc, "sidecar_memory_pressure") == 1
        await _events_and_changes(c, 1)
        # The flood has stopped. Tick the clock a second at a time until a concurrent span push is taken.
        ticks = 0
        while True:
            ticks += 1
            clock.advance(1.0)
            r = await c.post("/v1/traces", content=_batch(rnd, spans=1, attrs=1, chars=10), headers=JS)
            if r.status_code == 200:
                break
            assert r.status_code == 503 and ticks < 60
        adm._inflight["otlp_traces"] = 0
    # Recovered within one relief interval (not "until restart"): the next relief evicted the store under the
    # limit (3 ticks of 1 s with this seed: the relief before had run 2 s before the flood stopped).
    assert 1 <= ticks <= math.ceil(RELIEF_SECS)
    assert _value(svc, "sidecar_memory_pressure") == 0
    assert _refused(svc, "/v1/events") == 0 and _refused(svc, "changes") == 0
