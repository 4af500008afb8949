"""A real Triton for the verdict tests: explicit model control, one Python model whose load and first
executions are slow on purpose, and tracing in mode=triton (so the governor has something to change)."""

from __future__ import annotations

from pathlib import Path

import httpx

from sidecar.demo.tritonserver import TritonServer

SLOW_CONFIG = """name: "slow"
backend: "python"
max_batch_size: 8
input [ { name: "x", data_type: TYPE_FP32, dims: [ 4 ] } ]
output [ { name: "score", data_type: TYPE_FP32, dims: [ 1 ] } ]
dynamic_batching { max_queue_delay_microseconds: 5000 preferred_batch_size: [ 4 ] }
instance_group [ { count: 1, kind: KIND_CPU } ]
"""

# The model's initialize() sleeps (a slow load); its first three executions are slow (a cold cache).
SLOW_MODEL = """import time
import numpy as np
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def initialize(self, args):
        time.sleep(3.0)
        self.calls = 0

    def execute(self, requests):
        self.calls += 1
        if self.calls <= 3:
            time.sleep(0.3)
        out = []
        for r in requests:
            x = pb_utils.get_input_tensor_by_name(r, "x").as_numpy().astype(np.float32)
            y = pb_utils.Tensor("score", x.sum(axis=1, keepdims=True).astype(np.float32))
            out.append(pb_utils.InferenceResponse(output_tensors=[y]))
        return out
"""


def slow_repository(root: Path) -> Path:
    repo = root / "repo"
    (repo / "slow" / "1").mkdir(parents=True)
    (repo / "slow" / "config.pbtxt").write_text(SLOW_CONFIG)
    (repo / "slow" / "1" / "model.py").write_text(SLOW_MODEL)
    return repo


def start_server(root: Path) -> TritonServer:
    server = TritonServer(
        slow_repository(root),
        root / "work",
        model_control_explicit=True,
        extra_args=[
            "--trace-config",
            "mode=triton",
            "--trace-config",
            f"triton,file={root / 'trace.json'}",
            "--trace-config",
            "rate=1000",
            "--trace-config",
            "level=TIMESTAMPS",
        ],
    )
    server.start()
    return server


def infer(server: TritonServer, model: str = "slow") -> int:
    body = {"inputs": [{"name": "x", "shape": [1, 4], "datatype": "FP32", "data": [1, 2, 3, 4]}]}
    return httpx.post(f"{server.http_url}/v2/models/{model}/infer", json=body, timeout=30).status_code
