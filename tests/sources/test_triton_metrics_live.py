"""The Triton metrics source against a real Triton 2.51 (CPU) started by the fixtures."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from prometheus_client import CollectorRegistry, generate_latest
from waiting import wait_until

from sidecar.clock import FakeClock
from sidecar.component import Bus
from sidecar.demo.tritonserver import TritonServer, demo_model_repository
from sidecar.promtext import parse_exposition
from sidecar.sources.triton_config import TritonConfig
from sidecar.sources.triton_metrics import TritonMetricsSource
from sidecar.wiring.triton import triton_pair

pytestmark = pytest.mark.triton


def infer(server: TritonServer, model: str, version: str, x: list[float]) -> int:
    body = {"inputs": [{"name": "x", "shape": [1, len(x)], "datatype": "FP32", "data": x}]}
    return httpx.post(
        f"{server.http_url}/v2/models/{model}/versions/{version}/infer", json=body, timeout=30
    ).status_code


def triton_counters(server: TritonServer) -> dict[tuple[str, str, str, str], float]:
    """Triton's own counters, read straight from its endpoint: (family, model, version, reason) -> value."""
    expo = parse_exposition(httpx.get(server.metrics_url, timeout=10).text)
    out = {}
    for name, raw, v in expo.samples:
        lab = expo.labels(raw)
        if name in ("nv_inference_request_success", "nv_inference_request_failure"):
            out[(name, lab["model"], lab["version"], lab.get("reason", ""))] = v
    return out


def make_source(
    server: TritonServer, clock: FakeClock, registry: CollectorRegistry
) -> tuple[TritonMetricsSource, httpx.AsyncClient]:
    http = httpx.AsyncClient()
    cfg = TritonConfig(metrics_url=server.metrics_url, http_url=server.http_url, timeout_secs=5)
    return triton_pair(cfg, registry=registry, clock=clock, http=http, bus=Bus(registry))[1], http


def derived(registry: CollectorRegistry, name: str, **labels: str) -> float | None:
    return registry.get_sample_value(name, labels)


async def test_rates_and_error_ratio_agree_with_tritons_own_counters(demo_triton: TritonServer) -> None:
    clock, registry = FakeClock(), CollectorRegistry()
    src, http = make_source(demo_triton, clock, registry)
    assert await src.scrape_once()
    before = triton_counters(demo_triton)
    statuses = [infer(demo_triton, "fraud", "1", [-1.0 if i % 4 == 0 else 10.0, 0.5, 0.5]) for i in range(20)]
    statuses += [infer(demo_triton, "ctr", "2", [1, 2, 3, 4]) for _ in range(6)]
    assert statuses.count(500) == 5
    after = triton_counters(demo_triton)
    clock.advance(10)
    assert await src.scrape_once()

    ok = (
        after[("nv_inference_request_success", "fraud", "1", "")]
        - before[("nv_inference_request_success", "fraud", "1", "")]
    )
    failed = sum(after[k] - before[k] for k in after if k[0] == "nv_inference_request_failure" and k[1] == "fraud")
    assert (ok, failed) == (15, 5)
    fraud = {"model": "fraud", "version": "1"}
    assert derived(registry, "sidecar_model_successes_per_second", **fraud) == pytest.approx(ok / 10)
    assert derived(registry, "sidecar_model_failures_per_second", reason="BACKEND", **fraud) == pytest.approx(0.5)
    assert derived(registry, "sidecar_model_error_ratio", **fraud) == pytest.approx(failed / (ok + failed))
    assert derived(registry, "sidecar_model_requests_per_second", model="ctr", version="2") == pytest.approx(0.6)
    assert derived(registry, "sidecar_model_error_ratio", model="ctr", version="2") == 0.0
    for stage in ("queue", "compute_input", "compute_infer", "compute_output"):
        avg = derived(registry, "sidecar_model_stage_average_seconds", stage=stage, **fraud)
        assert avg is not None and 0 <= avg < 1
    assert derived(registry, "sidecar_model_stage_latency_seconds", stage="request", quantile="0.5", **fraud)
    await http.aclose()


@pytest.fixture
def explicit_triton(tmp_path: Path) -> Iterator[TritonServer]:
    server = TritonServer(demo_model_repository(), tmp_path, model_control_explicit=True, load_models=["fraud"])
    server.start()
    try:
        yield server
    finally:
        server.stop()


def no_negative_values(registry: CollectorRegistry) -> bool:
    return all(s.value >= 0 for fam in registry.collect() for s in fam.samples if s.name.startswith("sidecar_model_"))


async def test_killing_and_restarting_triton_marks_down_then_up_without_negative_rates(
    explicit_triton: TritonServer,
) -> None:
    clock, registry = FakeClock(), CollectorRegistry()
    src, http = make_source(explicit_triton, clock, registry)
    fraud = {"model": "fraud", "version": "1"}
    assert await src.scrape_once()
    for _ in range(12):
        infer(explicit_triton, "fraud", "1", [5.0, 0.1, 0.1])
    clock.advance(5)
    assert await src.scrape_once()
    assert derived(registry, "sidecar_model_successes_per_second", **fraud) == pytest.approx(12 / 5)

    explicit_triton.kill()
    clock.advance(5)
    assert not await src.scrape_once()
    assert derived(registry, "sidecar_triton_up") == 0
    assert derived(registry, "sidecar_model_successes_per_second", **fraud) is None
    assert not src.readiness().ok

    explicit_triton.start()  # same ports: the restarted server's counters start from zero
    for _ in range(3):
        infer(explicit_triton, "fraud", "1", [5.0, 0.1, 0.1])
    clock.advance(5)
    assert await src.scrape_once()
    assert derived(registry, "sidecar_triton_up") == 1
    # Straight after the restart the new counters (3) are lower than the old ones (12): a reset, not -9. The
    # interval runs from the last good scrape, 10 s ago.
    assert derived(registry, "sidecar_model_successes_per_second", **fraud) == pytest.approx(3 / 10)
    assert derived(registry, "sidecar_triton_series_resets_total") >= 1
    assert derived(registry, "sidecar_model_request_success_total", **fraud) == 15
    assert no_negative_values(registry)
    assert b"sidecar_triton_up 1.0" in generate_latest(registry)
    await http.aclose()


def wait_until_index(server: TritonServer, want: set[tuple[str, str]], timeout_s: float = 60) -> None:
    """Unloading is asynchronous in Triton: wait (with a deadline) until its index shows exactly ``want``."""

    def settled() -> bool:
        index = httpx.post(f"{server.http_url}/v2/repository/index", timeout=10).json()
        return {(m["name"], m["version"]) for m in index if m.get("state") == "READY"} == want and all(
            m.get("state") in ("READY", "UNAVAILABLE") for m in index
        )

    assert wait_until(settled, timeout_s, interval_s=0.1), f"Triton's index never became {want}"


def versions_seen(registry: CollectorRegistry, model: str) -> set[str]:
    return {
        s.labels["version"]
        for fam in registry.collect()
        for s in fam.samples
        if s.name == "sidecar_model_pending_requests" and s.labels["model"] == model
    }


async def test_loading_and_unloading_versions_shows_in_the_derived_series(explicit_triton: TritonServer) -> None:
    clock, registry = FakeClock(), CollectorRegistry()
    src, http = make_source(explicit_triton, clock, registry)
    assert await src.scrape_once()
    assert versions_seen(registry, "ctr") == set()

    r = httpx.post(f"{explicit_triton.http_url}/v2/repository/models/ctr/load", timeout=60)
    assert r.status_code == 200, r.text
    clock.advance(5)
    assert await src.scrape_once()
    assert versions_seen(registry, "ctr") == {"1", "2"}

    # Reload with a policy that serves only version 1: version 2 is unloaded.
    cfg = (demo_model_repository() / "ctr" / "config.pbtxt").read_text()
    only_v1 = {
        "name": "ctr",
        "backend": "python",
        "max_batch_size": 16,
        "version_policy": {"specific": {"versions": [1]}},
        "input": [{"name": "x", "data_type": "TYPE_FP32", "dims": [4]}],
        "output": [{"name": "score", "data_type": "TYPE_FP32", "dims": [1]}],
    }
    assert "version_policy" in cfg
    r = httpx.post(
        f"{explicit_triton.http_url}/v2/repository/models/ctr/load",
        json={"parameters": {"config": json.dumps(only_v1)}},
        timeout=60,
    )
    assert r.status_code == 200, r.text
    wait_until_index(explicit_triton, {("ctr", "1"), ("fraud", "1")})
    clock.advance(5)
    assert await src.scrape_once()
    assert versions_seen(registry, "ctr") == {"1"}

    r = httpx.post(f"{explicit_triton.http_url}/v2/repository/models/ctr/unload", timeout=60)
    assert r.status_code == 200, r.text
    wait_until_index(explicit_triton, {("fraud", "1")})
    clock.advance(5)
    assert await src.scrape_once()
    assert versions_seen(registry, "ctr") == set()
    assert versions_seen(registry, "fraud") == {"1"}
    await http.aclose()


def model_count(registry: CollectorRegistry) -> float | None:
    return derived(registry, "sidecar_triton_models")


async def test_an_unloaded_version_stops_counting_and_a_reload_counts_every_request(
    explicit_triton: TritonServer,
) -> None:
    """Triton 2.51 leaves four zero-valued failure series behind for an unloaded version; they are not a model,
    and requests served between the reload and the next scrape reach the rates and totals."""
    clock, registry = FakeClock(), CollectorRegistry()
    src, http = make_source(explicit_triton, clock, registry)
    v2 = {"model": "ctr", "version": "2"}
    url = explicit_triton.http_url
    assert httpx.post(f"{url}/v2/repository/models/ctr/load", timeout=60).status_code == 200
    assert await src.scrape_once()
    for _ in range(4):
        assert infer(explicit_triton, "ctr", "2", [1, 2, 3, 4]) == 200
    clock.advance(5)
    assert await src.scrape_once()
    assert derived(registry, "sidecar_model_request_success_total", **v2) == 4
    assert model_count(registry) == 3

    assert httpx.post(f"{url}/v2/repository/models/ctr/unload", timeout=60).status_code == 200
    wait_until_index(explicit_triton, {("fraud", "1")})
    leftovers = [k for k in triton_counters(explicit_triton) if k[1] == "ctr"]
    assert leftovers and all(k[0] == "nv_inference_request_failure" for k in leftovers)  # what Triton leaves
    clock.advance(5)
    assert await src.scrape_once()
    assert model_count(registry) == 1
    ctr_series = {
        s.name
        for fam in registry.collect()
        for s in fam.samples
        if s.name.startswith("sidecar_") and s.labels.get("model") == "ctr"
    }
    assert ctr_series == set()

    assert httpx.post(f"{url}/v2/repository/models/ctr/load", timeout=60).status_code == 200
    for _ in range(5):
        assert infer(explicit_triton, "ctr", "2", [1, 2, 3, 4]) == 200
    assert triton_counters(explicit_triton)[("nv_inference_request_success", "ctr", "2", "")] == 5
    clock.advance(5)
    assert await src.scrape_once()
    assert derived(registry, "sidecar_model_successes_per_second", **v2) == pytest.approx(5 / 5)
    assert derived(registry, "sidecar_model_request_success_total", **v2) == 4 + 5
    assert derived(registry, "sidecar_triton_model_resets_total", **v2) == 1
    assert derived(registry, "sidecar_triton_model_resets_total", model="fraud", version="1") == 0
    await http.aclose()


async def test_ratios_over_the_window_match_tritons_own_deltas_when_half_the_requests_fail(
    demo_triton: TritonServer,
) -> None:
    clock, registry = FakeClock(), CollectorRegistry()
    src, http = make_source(demo_triton, clock, registry)
    assert await src.scrape_once()
    before = triton_counters_all(demo_triton, "fraud")
    statuses = [infer(demo_triton, "fraud", "1", [-1.0 if i % 2 else 10.0, 0.5, 0.5]) for i in range(10)]
    assert statuses.count(500) == 5
    after = triton_counters_all(demo_triton, "fraud")
    clock.advance(5)
    assert await src.scrape_once()
    delta = {k: after[k] - before.get(k, 0.0) for k in after}
    # Triton's own counters: failures are not inferences but are executions.
    assert (
        delta["nv_inference_request_success"],
        delta["nv_inference_count"],
        delta["nv_inference_exec_count"],
        delta["nv_inference_request_failure"],
    ) == (5, 5, 10, 5)
    fraud = {"model": "fraud", "version": "1"}
    assert derived(registry, "sidecar_model_inferences_per_execution", **fraud) == 1.0
    assert derived(registry, "sidecar_model_error_ratio", **fraud) == 0.5

    # A clean interval next: over the 60 s window the ratio is Triton's own deltas of both intervals, not 0.
    assert [infer(demo_triton, "fraud", "1", [10.0, 0.5, 0.5]) for _ in range(10)] == [200] * 10
    later = triton_counters_all(demo_triton, "fraud")
    clock.advance(5)
    assert await src.scrape_once()
    failed = later["nv_inference_request_failure"] - before["nv_inference_request_failure"]
    total = failed + later["nv_inference_request_success"] - before["nv_inference_request_success"]
    assert (failed, total) == (5, 20)
    assert derived(registry, "sidecar_model_error_ratio", **fraud) == failed / total
    assert derived(registry, "sidecar_model_inferences_per_execution", **fraud) == 1.0
    await http.aclose()


def triton_counters_all(server: TritonServer, model: str) -> dict[str, float]:
    """Triton's counters of one model (version 1), summed over reasons."""
    expo = parse_exposition(httpx.get(server.metrics_url, timeout=10).text)
    out: dict[str, float] = {}
    for name, raw, v in expo.samples:
        lab = expo.labels(raw)
        if lab.get("model") == model and lab.get("version") == "1" and "quantile" not in lab:
            out[name] = out.get(name, 0.0) + v
    return out


_ERROR_RESPONSE_MODEL = """
import numpy as np
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def execute(self, requests):
        out = []
        for request in requests:
            x = pb_utils.get_input_tensor_by_name(request, "x").as_numpy()
            if (x < 0).any():
                out.append(pb_utils.InferenceResponse(error=pb_utils.TritonError("negative input")))
            else:
                out.append(pb_utils.InferenceResponse(output_tensors=[pb_utils.Tensor("y", x.astype(np.float32))]))
        return out
"""


def test_triton_counts_a_python_backend_error_response_as_a_success(tmp_path: Path) -> None:
    """Pins what docs/serving.md says under Limits: the client gets HTTP 500, Triton counts a success."""
    repo = tmp_path / "repo"
    (repo / "echo" / "1").mkdir(parents=True)
    (repo / "echo" / "config.pbtxt").write_text(
        'name: "echo"\nbackend: "python"\nmax_batch_size: 4\n'
        'input [ { name: "x", data_type: TYPE_FP32, dims: [ 1 ] } ]\n'
        'output [ { name: "y", data_type: TYPE_FP32, dims: [ 1 ] } ]\n'
        "instance_group [ { count: 1, kind: KIND_CPU } ]\n"
    )
    (repo / "echo" / "1" / "model.py").write_text(_ERROR_RESPONSE_MODEL)
    server = TritonServer(repo, tmp_path / "work")
    server.start()
    try:
        body = {"inputs": [{"name": "x", "shape": [1, 1], "datatype": "FP32", "data": [-1.0]}]}
        r = httpx.post(f"{server.http_url}/v2/models/echo/versions/1/infer", json=body, timeout=30)
        assert r.status_code == 500 and "negative input" in r.text
        counters = triton_counters(server)
        assert counters[("nv_inference_request_success", "echo", "1", "")] == 1
        assert sum(v for k, v in counters.items() if k[0] == "nv_inference_request_failure" and k[1] == "echo") == 0
    finally:
        server.stop()
