"""The canary verdict against a real Triton 2.51 (CPU): v2 of a Python model sleeps and scores differently; the
test calls both versions alternately, posts one event per call (measured latency, returned score) to the sidecar's
/v1/events, and the verdict, its metrics and the alert the book makes say v2 is worse."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from fastapi.testclient import TestClient
from prometheus_client import CollectorRegistry

from sidecar.alerting.book import AlertBook
from sidecar.alerting.config import AlertingConfig
from sidecar.app import create_app
from sidecar.clock import FakeClock
from sidecar.config import parse_config
from sidecar.demo.tritonserver import TritonServer
from sidecar.service import Service
from sidecar.store import Store
from sidecar.wiring.canary import build as canary_build
from sidecar.wiring.events import build as events_build

pytestmark = pytest.mark.triton

_CONFIG = """name: "rollout"
backend: "python"
max_batch_size: 8
version_policy: { all { } }
input [ { name: "x", data_type: TYPE_FP32, dims: [ 4 ] } ]
output [ { name: "score", data_type: TYPE_FP32, dims: [ 1 ] } ]
instance_group [ { count: 1, kind: KIND_CPU } ]
"""

_MODEL = """import time
import numpy as np
import triton_python_backend_utils as pb_utils

SLEEP_S = {sleep}
BIAS = {bias}


class TritonPythonModel:
    def execute(self, requests):
        out = []
        for request in requests:
            x = pb_utils.get_input_tensor_by_name(request, "x").as_numpy().astype(np.float32)
            if SLEEP_S:
                time.sleep(SLEEP_S)
            s = 1.0 / (1.0 + np.exp(-(x.sum(axis=1, keepdims=True) * 0.5 + BIAS)))
            out.append(pb_utils.InferenceResponse(output_tensors=[pb_utils.Tensor("score", s.astype(np.float32))]))
        return out
"""


def _repository(root: Path) -> Path:
    model = root / "repo" / "rollout"
    for version, sleep, bias in (("1", 0.0, -1.0), ("2", 0.03, 0.5)):
        (model / version).mkdir(parents=True)
        (model / version / "model.py").write_text(_MODEL.format(sleep=sleep, bias=bias))
    (model / "config.pbtxt").write_text(_CONFIG)
    return root / "repo"


@pytest.fixture
def rollout_triton(tmp_path: Path) -> Iterator[TritonServer]:
    server = TritonServer(_repository(tmp_path), tmp_path / "triton", summary_latencies=False)
    server.start()
    try:
        yield server
    finally:
        server.stop()


def test_a_slower_v2_that_scores_differently_is_called_worse(rollout_triton: TritonServer, tmp_path: Path) -> None:
    clock = FakeClock()
    cfg = parse_config({"events": {"enabled": True},
                        "checks": {"canary": {"enabled": True, "min_samples": 60, "for_secs": 0}}})
    svc = Service(cfg, clock=clock, registry=CollectorRegistry(), store=Store(tmp_path / "s.sqlite"),
                  factories=[events_build, canary_build])
    n = 120
    events = []
    with httpx.Client(base_url=rollout_triton.http_url, timeout=30) as triton:
        for version in ("1", "2"):  # the first call of a version loads its stub's code paths: not measured
            warm = {"inputs": [{"name": "x", "shape": [1, 4], "datatype": "FP32", "data": [0.0] * 4}]}
            assert triton.post(f"/v2/models/rollout/versions/{version}/infer", json=warm).status_code == 200
        for i in range(n):
            x = [float((i * 7 + k) % 5) - 2.0 for k in range(4)]
            for version in ("1", "2"):
                body = {"inputs": [{"name": "x", "shape": [1, 4], "datatype": "FP32", "data": x}]}
                t0 = time.perf_counter()
                r = triton.post(f"/v2/models/rollout/versions/{version}/infer", json=body)
                latency_ms = (time.perf_counter() - t0) * 1000
                assert r.status_code == 200, r.text
                events.append({"model": "rollout", "version": version, "timestamp": clock.now(),
                               "score": r.json()["outputs"][0]["data"][0],
                               "fields": {"latency_ms": latency_ms, "error": 0}})
    with TestClient(create_app(svc)) as client:
        assert client.post("/v1/events", json=events).json()["accepted"] == 2 * n
        findings = svc.evaluate_once(clock.now())
    (f,) = [f for f in findings if f.check == "canary"]
    assert f.active and f.labels["baseline"] == "1" and f.labels["candidate"] == "2"
    assert {"p50", "p99", "scores"} <= set(str(f.facts["worse"]).split(","))
    assert "errors" not in str(f.facts["worse"])  # no call failed: the error aspect is decided, and healthy
    assert f.facts["errors.q"] is not None
    assert f.facts["p50.cand"] - f.facts["p50.base"] > 25  # type: ignore[operator]  # the 30 ms sleep
    reg = svc.registry
    lbl = {"model": "rollout", "baseline": "1", "candidate": "2"}
    assert reg.get_sample_value("sidecar_canary_verdict", {**lbl, "aspect": "p99"}) == 1
    assert reg.get_sample_value("sidecar_canary_verdict", {**lbl, "aspect": "errors"}) == 0

    book = AlertBook(AlertingConfig.model_validate({"enabled": True}), registry=CollectorRegistry(),
                     eval_interval_secs=15, sink=None, runbook_base="/runbooks", dashboard_base=None,
                     sidecar_url="http://sidecar")
    book.on_findings([f], clock.now())
    (alert,) = book.alerts.values()
    assert alert.state == "firing" and alert.labels["alertname"] == "CanaryVersionWorse"
    summary = alert.annotations["summary"]
    assert "rollout v2 worse on p50 by " in summary and "consider reverting to version 1" in summary
    assert alert.annotations["runbook_url"] == "/runbooks/CanaryVersionWorse.md"
