"""Triton's statistics reach the GPU memory attribution through the diagnose probe (real Triton 2.51, CPU)."""

from __future__ import annotations

import httpx
import pytest
from prometheus_client import CollectorRegistry

from sidecar.clock import SystemClock
from sidecar.demo.tritonserver import TritonServer
from sidecar.diagnose.config import DiagnoseConfig
from sidecar.diagnose.runner import Diagnoser
from sidecar.processors.gpu_memory import GpuMemoryByModel

pytestmark = pytest.mark.triton


async def test_real_statistics_are_read_and_a_cpu_server_reports_no_gpu_memory(demo_triton: TritonServer) -> None:
    registry = CollectorRegistry()
    memory = GpuMemoryByModel(registry)
    bodies: list[object] = []

    def on_stats(body: object) -> None:
        bodies.append(body)
        memory.observe_stats(body)

    diag = Diagnoser(
        DiagnoseConfig(timeout_secs=10),
        metrics_url=demo_triton.metrics_url,
        http_url=demo_triton.http_url,
        spans_expected=False,
        registry=registry,
        clock=SystemClock(),
        http=httpx.AsyncClient(),
        on_stats=on_stats,
    )
    await diag.probe_once()
    (body,) = bodies
    assert isinstance(body, dict)
    names = {(s["name"], s["version"]) for s in body["model_stats"]}
    assert {("ctr", "1"), ("ctr", "2"), ("fraud", "1")} <= names
    # Triton 2.51 answers memory_usage: [] for Python-backend models on CPU: no figure, not a zero.
    assert all(s["memory_usage"] == [] for s in body["model_stats"])
    assert memory.figures()["triton_stats"] == {}
    assert registry.get_sample_value("sidecar_diagnose_stats_fetches_total", {"result": "ok"}) == 1
