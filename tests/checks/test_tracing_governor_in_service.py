"""The three verdicts wired into a Service: the model-API poller feeds the cold-start watch and the batching
advisor over the bus, the governor gets findings as a finding sink and records its changes in the change log,
and ``/`` shows one line of what they say."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Sequence

import httpx
from fastapi.testclient import TestClient
from prometheus_client import CollectorRegistry

from sidecar.app import create_app
from sidecar.clock import FakeClock
from sidecar.component import Role
from sidecar.config import parse_config
from sidecar.model import Finding
from sidecar.service import Service
from sidecar.store import Store
from sidecar.wiring.alerting import build as alerting
from sidecar.wiring.pages import build as pages
from sidecar.wiring.verdicts import build as verdicts

TRITON = "http://triton.example:8000"


class FakeTriton:
    """Triton's model and trace APIs: ctr v2 serving 10 requests/s one at a time, each waiting the 5 ms delay."""

    def __init__(self) -> None:
        self.n = 0.0
        self.trace = {"trace_level": ["TIMESTAMPS"], "trace_rate": "100", "trace_mode": "triton"}
        self.model_trace: dict[str, dict[str, object]] = {}
        self.posts: list[tuple[str, object]] = []

    def __call__(self, req: httpx.Request) -> httpx.Response:
        path = req.url.path
        if path == "/v2/repository/index":
            return httpx.Response(200, json=[{"name": "ctr", "version": "2", "state": "READY"}])
        if path == "/v2/models/stats":
            n = self.n
            return httpx.Response(
                200,
                json={
                    "model_stats": [
                        {
                            "name": "ctr",
                            "version": "2",
                            "inference_count": n,
                            "execution_count": n,
                            "inference_stats": {
                                "success": {"count": n, "ns": n * 6e6},
                                "queue": {"count": n, "ns": n * 5e6},
                            },
                        }
                    ]
                },
            )
        if path == "/v2/models/ctr/config":
            return httpx.Response(
                200,
                json={"name": "ctr", "max_batch_size": 16, "dynamic_batching": {"max_queue_delay_microseconds": 5000}},
            )
        if path == "/v2/trace/setting":
            if req.method == "POST":
                body = json.loads(req.content)
                self.posts.append((path, body))
                self.trace = {**self.trace, **body}
            return httpx.Response(200, json=self.trace)
        if path == "/v2/models/ctr/trace/setting" and req.method == "POST":
            body = json.loads(req.content)
            self.posts.append((path, body))
            self.model_trace = {} if body["trace_rate"] is None else {"ctr": body}
            return httpx.Response(200, json={**self.trace, **self.model_trace.get("ctr", {})})
        return httpx.Response(404, text=f"no {path}")


class Script:
    name = "script"
    role = Role.CHECK

    def __init__(self) -> None:
        self.findings: list[Finding] = []

    def evaluate(self, now: float) -> Sequence[Finding]:
        return self.findings

    async def start(self) -> None: ...

    async def shutdown(self) -> None: ...

    def readiness(self) -> None:
        return None

    def routes(self) -> None:
        return None


def test_verdicts_in_a_service_from_poll_to_page_and_change_log() -> None:
    cfg = parse_config(
        {
            "triton": {"enabled": False, "http_url": TRITON},
            "alerting": {"enabled": True, "changes": {"poll_repository": False}},
            "checks": {
                "cold_start": {"enabled": True},
                "batching": {"enabled": True, "min_requests": 50},
                "tracing_governor": {"enabled": True, "boosted_rate": 10},
            },
        }
    )
    triton, clock, script = FakeTriton(), FakeClock(), Script()
    svc = Service(
        cfg,
        clock=clock,
        store=Store(":memory:"),
        registry=CollectorRegistry(),
        http=httpx.AsyncClient(transport=httpx.MockTransport(triton)),
        factories=[alerting, verdicts, pages, lambda ctx: [script]],
    )
    poller = svc.component("triton_model_api")
    for _ in range(7):
        assert asyncio.run(poller.poll_once())
        triton.n += 100
        clock.advance(10)
    script.findings = [
        Finding(check="drift", kind="drift", labels={"model": "ctr", "version": "2"}, active=True, value=0.3)
    ]
    found = svc.evaluate_once()
    (advice,) = [f for f in found if f.kind == "advice"]
    assert advice.facts["verdict"] == "too_long"
    asyncio.run(svc.component("tracing_governor").apply_once())
    assert triton.posts == [
        ("/v2/trace/setting", {"trace_rate": "1000", "trace_level": ["TIMESTAMPS"]}),
        ("/v2/models/ctr/trace/setting", {"trace_rate": "10", "trace_level": ["TIMESTAMPS", "TENSORS"]}),
    ]
    client = TestClient(create_app(svc))
    changes = client.get("/v1/changes").json()
    whats = [c["what"] for c in changes]
    assert "trace rate of ctr raised to 1 in 10, level TIMESTAMPS+TENSORS (drift finding drift active)" in whats
    page = client.get("/").text
    assert "verdicts: ctr v2: queue delay too long; tracing raised for ctr" in page
