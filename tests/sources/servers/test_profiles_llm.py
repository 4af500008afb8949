"""SGLang, TGI, TF Serving and Triton's TensorRT-LLM backend, each on an exposition built from its own source."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from sidecar.promtext import parse_exposition
from sidecar.sources.servers import Counter, DistName, Gauge, detect, map_exposition
from sidecar.sources.servers.registry import family_names
from sidecar.sources.servers.schema import ServingSnapshot


def _detect_and_map(text: str) -> ServingSnapshot:
    expo = parse_exposition(text)
    prof = detect(family_names((n for n, _l, _v in expo.samples), expo.types))
    assert prof is not None
    return map_exposition(expo, prof, server="s", taken_at=0.0)


def test_sglang(fixture_text: Callable[[str], str]) -> None:
    snap = _detect_and_map(fixture_text("sglang.prom"))
    assert snap.profile == "sglang" and snap.refused == ()
    m = snap.models[("qwen2.5-7b", "")]
    assert dict(m.requests) == {"success": 30, "aborted": 2}
    assert (m.counters[Counter.INPUT_TOKENS], m.counters[Counter.OUTPUT_TOKENS]) == (5000, 1200)
    assert m.gauges == {Gauge.IN_FLIGHT: 12, Gauge.WAITING: 3, Gauge.KV_CACHE_USAGE: 0.42}
    assert m.dists[DistName.TIME_TO_FIRST_TOKEN].sum == pytest.approx(9.0)
    # Speculative decoding: 40 steps of 30 ms, 3 tokens each, are 120 observations of 10 ms (per token).
    itl = m.dists[DistName.INTER_TOKEN_LATENCY]
    assert itl.count == 120 and itl.sum / itl.count == pytest.approx(0.01)
    assert m.dists[DistName.QUEUE_DURATION].count == 30


def test_tgi(fixture_text: Callable[[str], str]) -> None:
    snap = _detect_and_map(fixture_text("tgi.prom"))
    assert snap.profile == "tgi" and snap.refused == ()
    m = snap.models[("default", "")]  # TGI serves one model and names none
    assert dict(m.requests) == {"success": 20, "failure": 4}
    assert m.counters[Counter.INPUT_TOKENS] == 4000  # the per-request histograms' sums
    assert m.counters[Counter.OUTPUT_TOKENS] == 2000
    assert m.dists[DistName.REQUEST_DURATION].sum == pytest.approx(30.0)
    assert m.dists[DistName.TIME_PER_OUTPUT_TOKEN].sum / 20 == pytest.approx(0.014)
    batch = m.dists[DistName.BATCH_SIZE]
    assert batch.sum / batch.count == 4
    assert m.gauges == {Gauge.WAITING: 4, Gauge.IN_FLIGHT: 6}
    assert DistName.TIME_TO_FIRST_TOKEN not in m.dists


def test_tfserving(fixture_text: Callable[[str], str]) -> None:
    snap = _detect_and_map(fixture_text("tfserving.prom"))
    assert snap.profile == "tfserving" and snap.refused == ()
    m = snap.models[("half_plus_two", "")]
    assert dict(m.requests) == {"success": 50, "failure": 4, "aborted": 1}
    e2e = m.dists[DistName.REQUEST_DURATION]
    assert e2e.sum / e2e.count == pytest.approx(0.003)  # 3000 us
    assert e2e.buckets[0] == (pytest.approx(10e-6), 0)
    assert m.dists[DistName.COMPUTE_DURATION].sum / 54 == pytest.approx(0.002)


def test_triton_with_tensorrt_llm(fixture_text: Callable[[str], str]) -> None:
    snap = _detect_and_map(fixture_text("triton-trtllm.prom"))
    assert snap.profile == "triton"
    m = snap.models[("tensorrt_llm", "1")]
    assert m.gauges[Gauge.IN_FLIGHT] == 9  # request_type="active" only, not max or scheduled
    assert m.gauges[Gauge.KV_CACHE_USAGE] == pytest.approx(0.25)  # used 1000 of max 4000 blocks
    assert m.requests["success"] == 64


def test_triton_with_its_vllm_backend(fixture_text: Callable[[str], str]) -> None:
    snap = _detect_and_map(fixture_text("triton-vllm.prom"))
    assert snap.profile == "triton"  # Triton's own families and the backend's vllm:* ones, read together
    m = snap.models[("vllm_model", "1")]
    assert (m.counters[Counter.INPUT_TOKENS], m.counters[Counter.OUTPUT_TOKENS]) == (700, 300)
    assert m.dists[DistName.TIME_TO_FIRST_TOKEN].sum / 10 == pytest.approx(0.09)
    itl = m.dists[DistName.INTER_TOKEN_LATENCY]
    assert itl.count == 290 and itl.sum / itl.count == pytest.approx(0.03)
    e2e = m.dists[DistName.REQUEST_DURATION]  # from Triton's counters, not summed with the backend's histogram
    assert (e2e.sum, e2e.count) == (pytest.approx(12.0), 10)
