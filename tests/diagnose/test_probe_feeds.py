"""What the diagnose probe hands on and keeps: GPU memory readings that turn a load change on the bus into a
load delta, model configs dropped when a model goes and asked again so a raised instance count clears."""

from __future__ import annotations

import asyncio
from pathlib import Path

import httpx
from prometheus_client import CollectorRegistry

from sidecar.clock import FakeClock
from sidecar.config import parse_config
from sidecar.diagnose.config import DiagnoseConfig
from sidecar.diagnose.runner import Diagnoser
from sidecar.model import Batch, Change
from sidecar.service import Service
from sidecar.store import Store
from sidecar.wiring.diagnose import build as diagnose_build
from tests.diagnose.recorded import exposition

MIB = 1024 * 1024


class _Triton:
    def __init__(self) -> None:
        self.gpu_used = 2000 * MIB
        self.instances = 1
        self.config_gets = 0
        self.fraud = True

    def __call__(self, request: httpx.Request) -> httpx.Response:
        if request.url.path == "/metrics":
            text = exposition(success=1000, queue_us=0, compute_us=0)
            if not self.fraud:
                text = "\n".join(ln for ln in text.splitlines() if 'model="fraud"' not in ln) + "\n"
            text += f'nv_gpu_memory_used_bytes{{gpu_uuid="GPU-4a1c"}} {self.gpu_used}\n'
            return httpx.Response(200, text=text, headers={"content-type": "text/plain"})
        if request.url.path.endswith("/config"):
            self.config_gets += 1
            return httpx.Response(200, json={"backend": "python", "instance_group": [{"count": self.instances}]})
        if request.url.path == "/v2/models/stats":
            return httpx.Response(200, json={"model_stats": []})
        return httpx.Response(404)


def test_a_load_on_the_bus_between_two_probes_is_a_load_delta(tmp_path: Path, clock: FakeClock) -> None:
    triton = _Triton()
    registry = CollectorRegistry()
    cfg = parse_config({"triton": {"http_url": "http://triton:8000"}})
    svc = Service(
        cfg,
        clock=clock,
        registry=registry,
        store=Store(tmp_path / "s.sqlite"),
        http=httpx.AsyncClient(transport=httpx.MockTransport(triton)),
        factories=[diagnose_build],
    )
    diag = svc.component("diagnose")
    asyncio.run(diag.probe_once())
    svc.bus.publish(
        Batch(
            kind="changes",
            source="changes",
            items=(
                Change(
                    what="version 3 appeared in Triton",
                    at=clock.now(),
                    model="rank",
                    version="3",
                    source="triton_repository",
                ),
            ),
        )
    )
    triton.gpu_used += 700 * MIB
    clock.advance(30)
    asyncio.run(diag.probe_once())
    assert (
        registry.get_sample_value(
            "sidecar_model_gpu_memory_bytes", {"model": "rank", "version": "3", "method": "load_delta"}
        )
        == 700 * MIB
    )


def _diagnoser(triton: _Triton, clock: FakeClock) -> Diagnoser:
    return Diagnoser(
        DiagnoseConfig(),
        metrics_url="http://triton:8002/metrics",
        http_url="http://triton:8000",
        spans_expected=False,
        registry=CollectorRegistry(),
        clock=clock,
        http=httpx.AsyncClient(transport=httpx.MockTransport(triton)),
    )


def test_configs_are_asked_again_every_ten_probes(clock: FakeClock) -> None:
    triton = _Triton()
    diag = _diagnoser(triton, clock)
    first = asyncio.run(diag.probe_once())
    asked = triton.config_gets
    assert asked == len({m for m, _ in first.models})
    assert first.configs["fraud"].instances == 1
    triton.instances = 2
    for _ in range(8):
        asyncio.run(diag.probe_once())
    assert triton.config_gets == asked  # cached in between
    tenth = asyncio.run(diag.probe_once())
    assert triton.config_gets == 2 * asked
    assert tenth.configs["fraud"].instances == 2


def test_the_config_of_a_model_no_longer_served_is_dropped(clock: FakeClock) -> None:
    triton = _Triton()
    diag = _diagnoser(triton, clock)
    assert "fraud" in asyncio.run(diag.probe_once()).configs
    triton.fraud = False
    assert "fraud" not in asyncio.run(diag.probe_once()).configs
