"""On a real Triton 2.51 (the session's demo Triton): users' requests and the model probe's requests reach the
same model versions, Triton counts both, and the sidecar's SLIs count the users' only (the probe's ledger is
taken out of Triton's counters, sidecar/processors/probe_share.py), failures included."""

from __future__ import annotations

from typing import Any

import httpx
import pytest
from prometheus_client import CollectorRegistry
from waiting import wait_until

from sidecar.checks.probe.check import ModelProbe
from sidecar.checks.probe.client import TritonProbeClient
from sidecar.checks.probe.config import ProbesConfig
from sidecar.clock import FakeClock, SystemClock
from sidecar.component import Bus
from sidecar.demo.tritonserver import TritonServer
from sidecar.probe_marker import ProbeLedger
from sidecar.promtext import parse_exposition
from sidecar.sources.triton_config import TritonConfig
from sidecar.wiring.triton import triton_pair

pytestmark = pytest.mark.triton

CTR = {"version": "1", "inputs": [{"name": "x", "datatype": "FP32", "shape": [1, 4], "data": [0.1, 0.2, 0.3, 0.4]}]}
CTR["outputs"] = [{"name": "score", "datatype": "FP32", "shape": [1, 1]}]
FRAUD_OK = {"version": "1", "inputs": [{"name": "x", "datatype": "FP32", "shape": [1, 3], "data": [5, 0.5, 0.5]}]}
FRAUD_OK["outputs"] = [{"name": "score"}]
FRAUD_BAD = {**FRAUD_OK, "inputs": [{"name": "x", "datatype": "FP32", "shape": [1, 3], "data": [-1, 0.5, 0.5]}]}


def _infer(server: TritonServer, model: str, x: list[float]) -> int:
    body = {"inputs": [{"name": "x", "shape": [1, len(x)], "datatype": "FP32", "data": x}]}
    return httpx.post(f"{server.http_url}/v2/models/{model}/versions/1/infer", json=body, timeout=30).status_code


def _tritons_own(server: TritonServer) -> dict[tuple[str, str, str], float]:
    expo = parse_exposition(httpx.get(server.metrics_url, timeout=10).text)
    out: dict[tuple[str, str, str], float] = {}
    for name, raw, v in expo.samples:
        lab = expo.labels(raw)
        if name in ("nv_inference_request_success", "nv_inference_request_failure") and lab.get("version") == "1":
            out[(name, lab["model"], lab.get("reason", ""))] = v
    return out


def _ours(reg: CollectorRegistry) -> dict[tuple[str, str, str], float]:
    def v(name: str, **labels: str) -> float:
        return reg.get_sample_value(name, {"version": "1", **labels}) or 0.0

    return {
        ("success", "ctr", ""): v("sidecar_model_request_success_total", model="ctr"),
        ("success", "fraud", ""): v("sidecar_model_request_success_total", model="fraud"),
        ("failure", "fraud", "BACKEND"): v("sidecar_model_request_failure_total", model="fraud", reason="BACKEND"),
    }


async def test_the_slis_count_the_users_requests_not_the_probes(demo_triton: Any) -> None:
    server: TritonServer = demo_triton
    clock, reg, ledger = FakeClock(), CollectorRegistry(), ProbeLedger()
    http = httpx.AsyncClient()
    cfg = TritonConfig(metrics_url=server.metrics_url, http_url=server.http_url, timeout_secs=5)
    _, source = triton_pair(cfg, registry=reg, clock=clock, http=http, bus=Bus(reg), probe_ledger=ledger)
    probes = {
        name: ModelProbe(
            ProbesConfig.model_validate({"enabled": True, "models": {model: spec}}),
            client=TritonProbeClient(f"127.0.0.1:{server.http_port}"),
            registry=CollectorRegistry(),
            clock=SystemClock(),
            ledger=ledger,
        )
        for name, model, spec in (("ctr", "ctr", CTR), ("fraud_ok", "fraud", FRAUD_OK), ("bad", "fraud", FRAUD_BAD))
    }
    try:
        assert await source.scrape_once()
        raw0, ours0 = _tritons_own(server), _ours(reg)
        # Users: 7 on ctr, 4 good and 3 refused (BACKEND) on fraud; probes in between: 5, 2 and 2.
        users = [_infer(server, "ctr", [1, 2, 3, 4]) for _ in range(7)]
        for _ in range(5):
            assert await probes["ctr"].probe("ctr") == "ok"
        users += [_infer(server, "fraud", [10.0, 0.5, 0.5]) for _ in range(4)]
        users += [_infer(server, "fraud", [-1.0, 0.5, 0.5]) for _ in range(3)]
        for _ in range(2):
            assert await probes["fraud_ok"].probe("fraud") == "ok"
            assert await probes["bad"].probe("fraud") == "server_error"
        assert users.count(200) == 11
        want_raw = {
            ("nv_inference_request_success", "ctr", ""): 12,
            ("nv_inference_request_success", "fraud", ""): 6,
            ("nv_inference_request_failure", "fraud", "BACKEND"): 5,
        }

        def raw_delta() -> dict[tuple[str, str, str], float]:
            now = _tritons_own(server)
            return {k: now.get(k, 0.0) - raw0.get(k, 0.0) for k in want_raw}

        # Triton counted users and probes alike (it updates its statistics as it releases each request).
        assert wait_until(lambda: raw_delta() == want_raw, 20), raw_delta()
        clock.advance(10)
        assert await source.scrape_once()
        got = {k: v - ours0[k] for k, v in _ours(reg).items()}
        assert got == {("success", "ctr", ""): 7, ("success", "fraud", ""): 4, ("failure", "fraud", "BACKEND"): 3}
        fraud = {"model": "fraud", "version": "1"}
        assert reg.get_sample_value("sidecar_model_successes_per_second", fraud) == pytest.approx(0.4)
        assert reg.get_sample_value("sidecar_model_error_ratio", fraud) == pytest.approx(3 / 7)
        assert reg.get_sample_value("sidecar_triton_probe_unmatched_total") == 0
    finally:
        for p in probes.values():
            await p.shutdown()
        await http.aclose()
