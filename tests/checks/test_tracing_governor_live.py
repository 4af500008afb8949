"""The tracing governor against a real Triton 2.51 (CPU) tracing in mode=triton: settings it changes take effect
(read back with GET /v2/trace/setting and /v2/models/{m}/trace/setting) and are restored."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from prometheus_client import CollectorRegistry
from waiting import wait_until

from sidecar.checks.tracing_governor.check import TracingGovernor
from sidecar.checks.tracing_governor.config import GovernorConfig
from sidecar.clock import FakeClock
from sidecar.component import Bus
from sidecar.demo.tritonserver import TritonServer, demo_model_repository
from sidecar.model import Change, Finding
from sidecar.sources.triton_trace_control import TraceControlError, TritonTraceControl

pytestmark = pytest.mark.triton


@pytest.fixture(scope="module")
def tracing_triton(tmp_path_factory: pytest.TempPathFactory) -> Iterator[TritonServer]:
    root = tmp_path_factory.mktemp("triton-tracing")
    server = TritonServer(
        demo_model_repository(),
        root,
        extra_args=[
            "--trace-config",
            "mode=triton",
            "--trace-config",
            f"triton,file={root / 'trace.json'}",
            "--trace-config",
            "triton,log-frequency=1",
            "--trace-config",
            "rate=100",
            "--trace-config",
            "level=TIMESTAMPS",
        ],
    )
    server.start()
    try:
        yield server
    finally:
        server.stop()


def read(server: TritonServer, model: str | None = None) -> dict[str, object]:
    path = f"/v2/models/{model}/trace/setting" if model else "/v2/trace/setting"
    out: dict[str, object] = httpx.get(server.http_url + path, timeout=10).json()
    return out


def infer_ctr(server: TritonServer) -> int:
    body = {"inputs": [{"name": "x", "shape": [1, 4], "datatype": "FP32", "data": [1, 2, 3, 4]}]}
    return httpx.post(f"{server.http_url}/v2/models/ctr/versions/2/infer", json=body, timeout=30).status_code


def drift(model: str, active: bool) -> Finding:
    return Finding(
        check="drift", kind="drift", labels={"model": model, "version": "2", "feature": "a"}, active=active, value=0.4
    )


async def test_boost_and_restore_take_effect_in_triton(tracing_triton: TritonServer, tmp_path: Path) -> None:
    registry = CollectorRegistry()
    bus = Bus(registry)
    changes: list[Change] = []
    bus.subscribe("changes", "log", lambda b: changes.extend(b.items))
    async with httpx.AsyncClient() as http:
        gov = TracingGovernor(
            GovernorConfig(enabled=True, healthy_rate=1000, boosted_rate=5),
            bus=bus,
            control=TritonTraceControl(tracing_triton.http_url, http),
            registry=registry,
            clock=FakeClock(),
        )
        await gov.apply_once()
        assert read(tracing_triton)["trace_rate"] == "1000"
        assert read(tracing_triton, "ctr")["trace_rate"] == "1000"  # follows the global setting

        gov.on_findings([drift("ctr", True)], 0.0)
        await gov.apply_once()
        ctr = read(tracing_triton, "ctr")
        assert ctr["trace_rate"] == "5" and ctr["trace_level"] == ["TIMESTAMPS", "TENSORS"], ctr
        before = set(tracing_triton.workdir.glob("trace.json*"))
        for _ in range(10):
            assert infer_ctr(tracing_triton) == 200

        # The boost is real: Triton now writes ctr's output tensors (one request in 5 traced, a file per trace).
        def tensors_written() -> bool:
            texts = [p.read_text().replace(" ", "") for p in set(tracing_triton.workdir.glob("trace.json*")) - before]
            return any("TENSOR_BACKEND_OUTPUT" in t and '"model_name":"ctr"' in t for t in texts)

        assert wait_until(tensors_written, 15)
        assert read(tracing_triton, "fraud")["trace_rate"] == "1000"  # only the model with the finding
        assert read(tracing_triton)["trace_rate"] == "1000"

        gov.on_findings([drift("ctr", False)], 15.0)
        await gov.apply_once()
        assert read(tracing_triton, "ctr")["trace_rate"] == "1000"
        assert read(tracing_triton, "ctr")["trace_level"] == ["TIMESTAMPS"]

        gov.on_findings([drift("ctr", True)], 30.0)
        await gov.apply_once()
        await gov.shutdown()
        after = read(tracing_triton)
        assert (after["trace_rate"], after["trace_level"]) == ("100", ["TIMESTAMPS"])  # as Triton started
        assert read(tracing_triton, "ctr")["trace_rate"] == "100"
    boost = "trace rate of ctr raised to 1 in 5, level TIMESTAMPS+TENSORS (drift finding drift active)"
    assert [c.what for c in changes] == [
        "global trace rate set to 1 in 1000 (was 1 in 100), level TIMESTAMPS",
        boost,
        "trace settings of ctr back to the global 1 in 1000, level TIMESTAMPS (no finding active)",
        boost,
        "trace settings of ctr back to the global ones (shutdown)",
        "global trace rate restored to 1 in 100, level TIMESTAMPS",
    ]
    assert {c.model for c in changes} == {None, "ctr"} and {c.source for c in changes} == {"tracing_governor"}


async def test_a_model_triton_does_not_serve_is_a_counted_error(tracing_triton: TritonServer) -> None:
    async with httpx.AsyncClient() as http:
        control = TritonTraceControl(tracing_triton.http_url, http)
        with pytest.raises(TraceControlError) as err:
            await control.set("no_such_model", 5, ("TIMESTAMPS",))
        assert err.value.reason == "http_status"
