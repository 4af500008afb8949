"""Output sanity against a real Triton 2.51 (CPU): a Python model answers NaN, all zeros or out of range for some
inputs; Triton's TENSORS trace files (the output tensor mapped as a feature) feed the check, with no change to the
caller, and each test's finding names the requests that caused it."""

from __future__ import annotations

from pathlib import Path

import httpx
import pytest
from drift_testutil import make_ctx
from prometheus_client import CollectorRegistry
from waiting import wait_until

from sidecar.checks.output_sanity.check import OutputSanityCheck
from sidecar.checks.output_sanity.config import OutputSanityConfig
from sidecar.clock import FakeClock
from sidecar.demo.tritonserver import TritonServer
from sidecar.model import Batch, Event
from sidecar.sources.events.metrics import EventsMetrics
from sidecar.sources.trace_files import TraceFileSource, merge
from sidecar.sources.trace_files.metrics import TraceFileMetrics

pytestmark = pytest.mark.triton

_CONFIG = """name: "sick"
backend: "python"
max_batch_size: 8
input [ { name: "x", data_type: TYPE_FP32, dims: [ 2 ] } ]
output [ { name: "score", data_type: TYPE_FP32, dims: [ 1 ] } ]
instance_group [ { count: 1, kind: KIND_CPU } ]
"""

# x[0] selects the failure: -1 NaN, 0 zero, 5 out of [0, 1]; anything else a probability.
_MODEL = """import numpy as np
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def execute(self, requests):
        out = []
        for request in requests:
            x = pb_utils.get_input_tensor_by_name(request, "x").as_numpy().astype(np.float32)
            s = 1.0 / (1.0 + np.exp(-x[:, 1:2]))
            s[x[:, 0] == -1] = np.nan
            s[x[:, 0] == 0] = 0.0
            s[x[:, 0] == 5] = 1.7
            out.append(pb_utils.InferenceResponse(output_tensors=[pb_utils.Tensor("score", s.astype(np.float32))]))
        return out
"""


def test_nan_zero_and_out_of_range_outputs_from_tritons_tensors_are_each_a_finding(tmp_path: Path) -> None:
    (tmp_path / "repo" / "sick" / "1").mkdir(parents=True)
    (tmp_path / "repo" / "sick" / "config.pbtxt").write_text(_CONFIG)
    (tmp_path / "repo" / "sick" / "1" / "model.py").write_text(_MODEL)
    trace = tmp_path / "trace.json"
    server = TritonServer(
        tmp_path / "repo",
        tmp_path / "triton",
        summary_latencies=False,
        extra_args=[
            "--trace-config",
            "mode=triton",
            "--trace-config",
            f"triton,file={trace}",
            "--trace-config",
            "triton,log-frequency=1",
            "--trace-config",
            "rate=1",
            "--trace-config",
            "level=TIMESTAMPS",
            "--trace-config",
            "level=TENSORS",
        ],
    )
    plan = [("ok", 1.0)] * 20 + [("nan", -1.0)] * 2 + [("zero", 0.0)] * 8 + [("big", 5.0)]
    try:
        server.start()
        with httpx.Client(base_url=server.http_url, timeout=10) as client:
            for i, (kind, x0) in enumerate(plan):
                body = {
                    "id": f"req-{kind}-{i}",
                    "inputs": [{"name": "x", "shape": [1, 2], "datatype": "FP32", "data": [x0, i * 0.1]}],
                }
                assert client.post("/v2/models/sick/versions/1/infer", json=body).status_code == 200
        clock = FakeClock()
        ctx = make_ctx(
            tmp_path / "state.sqlite",
            clock,
            {
                "events": {
                    "triton_trace": {
                        "enabled": True,
                        "path": str(trace),
                        "models": {"sick": {"inputs": {"score": ["out"]}}},
                    }
                }
            },
        )
        got: list[Event] = []
        ctx.bus.subscribe("events", "t", lambda b: got.extend(b.items))  # type: ignore[arg-type]
        reader = TraceFileSource(
            merge(None, ctx.config.events.triton_trace),
            bus=ctx.bus,
            metrics=TraceFileMetrics(ctx.registry),
            clock=clock,
            store=ctx.store,
            events_metrics=EventsMetrics(ctx.registry),
        )
        wait_until(lambda: reader.poll_once() >= 0 and len(got) >= len(plan), 15.0, interval_s=0.2)
    finally:
        server.stop()
    assert len(got) == len(plan)

    check = OutputSanityCheck(
        OutputSanityConfig.model_validate(
            {
                "enabled": True,
                "min_samples": 20,
                "zero_max_ratio": 0.2,
                "models": {"sick": {"outputs": ["features.out"], "range": {"min": 0, "max": 1}}},
            }
        ),
        registry=CollectorRegistry(),
        clock=clock,
    )
    check.observe(Batch("events", "events_triton_tensors", tuple(got)))
    found = {f.labels["test"]: f for f in check.evaluate(clock.now())}
    nan, zero, big = found["nonfinite"], found["all_zero"], found["out_of_range"]
    assert nan.active and nan.facts["count"] == 2
    assert set(str(nan.facts["sample_request_ids"]).split(",")) == {"req-nan-20", "req-nan-21"}
    assert zero.active and zero.facts["count"] == 8 and zero.value == pytest.approx(8 / 31)
    assert big.active and big.facts["count"] == 1 and big.facts["sample_request_ids"] == "req-big-30"
    assert not found["collapsed"].active
