"""The verdicts on the ``/`` page, from the real canary and output sanity checks wired into a Service."""

from __future__ import annotations

import numpy as np
from fastapi.testclient import TestClient
from pagetree import parse
from prometheus_client import CollectorRegistry

from sidecar.app import create_app
from sidecar.clock import FakeClock
from sidecar.config import parse_config
from sidecar.model import Batch, Event
from sidecar.service import Service
from sidecar.store import Store
from sidecar.wiring.canary import build as verdicts_build
from sidecar.wiring.pages import build as pages


def _service(checks: dict[str, object]) -> Service:
    cfg = parse_config({"triton": {"enabled": False}, "checks": checks})
    return Service(
        cfg, clock=FakeClock(), store=Store(":memory:"), registry=CollectorRegistry(), factories=[verdicts_build, pages]
    )


def _rows(svc: Service) -> list[list[str]]:
    r = TestClient(create_app(svc)).get("/")
    assert r.status_code == 200, r.text
    table = parse(r.text).by_id("verdicts").find("table")
    return [[td.text() for td in tr.find_all("td")] for tr in table.find_all("tr")[1:]]


def test_status_page_shows_a_worse_canary_and_a_suspect_output_first() -> None:
    svc = _service(
        {"canary": {"enabled": True, "min_samples": 50}, "output_sanity": {"enabled": True, "min_samples": 50}}
    )
    now = svc.clock.now()
    rng = np.random.default_rng(1)
    evs = [
        Event(model="ctr", version=v, timestamp=now, score=float(s), fields={"latency_ms": float(lat)})
        for v, loc in (("1", 30.0), ("2", 45.0))
        for s, lat in zip(rng.random(500), rng.normal(loc, 2, 500), strict=True)
    ]
    evs += [Event(model="rank", version="3", timestamp=now, score=0.5) for _ in range(60)]
    batch = Batch("events", "test", tuple(evs))
    svc.component("canary").observe(batch)
    svc.component("output_sanity").observe(batch)
    svc.evaluate_once(now)
    rows = _rows(svc)
    assert rows[:2] == [
        ["canary", "ctr 2 vs 1", "worse", "p50, p99"],
        ["output sanity", "rank 3", "suspect", "collapsed"],
    ]
    assert ["output sanity", "ctr 1", "ok", ""] in rows and ["output sanity", "ctr 2", "ok", ""] in rows


def test_status_page_says_when_no_verdict_check_runs() -> None:
    svc = _service({})
    r = TestClient(create_app(svc)).get("/")
    assert "No canary comparison or output sanity check running" in parse(r.text).by_id("verdicts").text()
    assert svc.components and all(c.name != "canary" for c in svc.components)


def test_status_page_names_gpu_memory_per_model_with_its_method_largest_first() -> None:
    from sidecar.model import GpuProcess
    from sidecar.processors.gpu_memory import GpuMemoryByModel

    svc = _service({})
    mem = GpuMemoryByModel(svc.registry)
    stub = "/opt/tritonserver/backends/python/triton_python_backend_stub"

    def row(pid: int, model: str, version: str, mib: int) -> GpuProcess:
        return GpuProcess(
            "GPU-0", pid, mib * 1024 * 1024.0, (stub, f"/models/{model}/{version}/model.py", "-1", f"{model}_0_0")
        )

    r = TestClient(create_app(svc)).get("/")
    assert 'id="gpu-memory-line"' not in r.text  # nothing attributed: no line at all
    mem.observe_processes([row(10, "ctr", "1", 300), row(11, "fraud", "2", 2048), row(12, "ctr", "1", 212)])
    r = TestClient(create_app(svc)).get("/")
    line = parse(r.text).by_id("gpu-memory-line").text()
    assert line == "GPU memory by model: fraud v2 2.0 GiB (process); ctr v1 512.0 MiB (process)"
