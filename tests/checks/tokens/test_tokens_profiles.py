"""Each server profile maps its per-request token histograms onto ``request.input_tokens`` /
``request.output_tokens``, on expositions declared as each server's source declares them, and the wiring turns
them into what the token-length drift check reads."""

from __future__ import annotations

import math
from pathlib import Path

import pytest
from prometheus_client import CollectorRegistry, Gauge, Histogram, generate_latest

from sidecar.checks.tokens.hist import TokenHistogram
from sidecar.promtext import parse_exposition
from sidecar.sources.servers import DistName, detect, map_exposition
from sidecar.sources.servers.registry import family_names
from sidecar.sources.servers.schema import ModelServing, ServingSnapshot
from sidecar.wiring.tokens import token_histograms

DATA = Path(__file__).resolve().parents[2] / "data" / "servers"
IN, OUT = DistName.INPUT_TOKENS_PER_REQUEST, DistName.OUTPUT_TOKENS_PER_REQUEST


def _map(text: str, profile: str) -> ServingSnapshot:
    expo = parse_exposition(text)
    prof = detect(family_names((n for n, _l, _v in expo.samples), expo.types))
    assert prof is not None and prof.name == profile
    snap = map_exposition(expo, prof, server="s", taken_at=0.0)
    assert snap.refused == ()
    return snap


def test_tgi_input_length_and_generated_tokens() -> None:
    # tests/data/servers/tgi.prom: huggingface/text-generation-inference router/src/server.rs @ db931fc.
    m = _map((DATA / "tgi.prom").read_text(), "tgi").models[("default", "")]
    assert (m.dists[IN].count, m.dists[IN].sum) == (20, 4000)  # 20 requests of 200 prompt tokens
    assert m.dists[IN].buckets[4] == (pytest.approx(204.8), 20)  # 100 buckets of 40.96 tokens
    assert (m.dists[OUT].count, m.dists[OUT].sum) == (20, 2000)


def test_sglang_token_histograms() -> None:
    # sgl-project/sglang python/sglang/srt/metrics/collector.py @ 93d04878cfb9b08645fae7b11bd340ee33b34acf,
    # TokenizerMetricsCollector with collect_tokens_histogram: default_bucket_prompt_tokens for both families,
    # labels model_name and engine_type, observed once per finished request; written with prometheus_client.
    reg = CollectorRegistry()
    buckets = [100, 300, 500, 700, 1000, 1500, 2000, 3000, 4000, 5000, 6000, 7000, 8000, 9000, 10000, 12000]
    buckets += [15000, 20000, 22000, 25000, 30000, 35000, 40000, 66000, 99000, 132000, 300000, 600000, 900000]
    buckets += [1100000]
    lab = {"model_name": "qwen2.5-7b", "engine_type": "unified"}
    prompt = Histogram(
        "sglang:prompt_tokens_histogram", "Histogram of prompt token length.", list(lab), buckets=buckets, registry=reg
    )
    gen = Histogram(
        "sglang:generation_tokens_histogram",
        "Histogram of generation token length.",
        list(lab),
        buckets=buckets,
        registry=reg,
    )
    Gauge("sglang:num_running_reqs", "The number of running requests.", list(lab), registry=reg).labels(**lab)
    for x in (250.0, 450.0, 450.0, 2500.0):
        prompt.labels(**lab).observe(x)
        gen.labels(**lab).observe(90.0)
    m = _map(generate_latest(reg).decode(), "sglang").models[("qwen2.5-7b", "")]
    assert m.dists[IN].count == 4 and m.dists[IN].buckets[:3] == ((100, 0), (300, 1), (500, 3))
    assert m.dists[OUT].buckets[0] == (100, 4)


def _triton_text() -> str:
    """Triton with the TensorRT-LLM backend's token histograms (NVIDIA/TensorRT-LLM triton_backend/
    inflight_batcher_llm/src/custom_metrics_reporter/custom_metrics_reporter.cc @ 0d5352f5fc5f39ee2eaed948e67236
    e64ff68e2a: nv_llm_input_token_len / nv_llm_output_token_len, buckets 10, 50, 100, 500, 1000, labels model,
    version, response_metric_type) and the vLLM backend's (triton-inference-server/vllm_backend src/utils/metrics.py
    @ 1e66a222040f2191ee5411ed1169488a4e8acf43: vllm:request_prompt_tokens, vllm:request_generation_tokens,
    build_1_2_5_buckets(max_model_len)), in prometheus-cpp's text shape."""
    out = ["# HELP nv_inference_request_success Number of successful inference requests, all batch sizes\n"]
    out.append("# TYPE nv_inference_request_success counter\n")
    out.append('nv_inference_request_success{model="trt",version="1"} 8\n')
    out.append('nv_inference_request_success{model="vl",version="2"} 5\n')

    def hist(name: str, labels: str, les: list[float], values: list[float]) -> None:
        out.append(f"# HELP {name} TRT LLM response metrics\n# TYPE {name} histogram\n")
        out.append(f"{name}_count{{{labels}}} {len(values)}\n{name}_sum{{{labels}}} {sum(values):g}\n")
        for le in les:
            out.append(f'{name}_bucket{{{labels},le="{le:g}"}} {sum(1 for v in values if v <= le)}\n')
        out.append(f'{name}_bucket{{{labels},le="+Inf"}} {len(values)}\n')

    trt = [10.0, 50.0, 100.0, 500.0, 1000.0]
    rtype = 'model="trt",response_metric_type="total_{}_tokens",version="1"'
    hist("nv_llm_input_token_len", rtype.format("input"), trt, [40.0] * 8)
    hist("nv_llm_output_token_len", rtype.format("output"), trt, [7.0] * 8)
    one_two_five = [1.0, 2.0, 5.0, 10.0, 20.0, 50.0, 100.0, 200.0, 500.0, 1000.0, 2000.0]
    hist("vllm:request_prompt_tokens", 'model="vl",version="2"', one_two_five, [150.0] * 5)
    hist("vllm:request_generation_tokens", 'model="vl",version="2"', one_two_five, [30.0] * 5)
    return "".join(out)


def test_triton_tensorrt_llm_and_vllm_backends() -> None:
    snap = _map(_triton_text(), "triton")
    trt = snap.models[("trt", "1")]
    assert trt.dists[IN].buckets == ((10, 0), (50, 8), (100, 8), (500, 8), (1000, 8), (math.inf, 8))
    assert trt.dists[OUT].buckets[0] == (10, 8)
    vl = snap.models[("vl", "2")]
    assert vl.dists[IN].count == 5 and vl.dists[IN].buckets[7] == (200, 5)


class _Src:
    def __init__(self, snap: ServingSnapshot) -> None:
        self.last: ServingSnapshot | None = snap


def test_the_wiring_hands_the_check_each_models_token_histograms() -> None:
    snap = _map(_triton_text(), "triton")
    other = ServingSnapshot("s2", "triton", 0.0, {("m", "1"): ModelServing()}, frozenset())
    got = token_histograms([_Src(snap), _Src(other)])  # type: ignore[list-item]
    keys = sorted((h.server, h.model, h.version, h.tokens) for h in got)
    assert keys == [("s", m, v, d) for m, v in (("trt", "1"), ("vl", "2")) for d in ("input", "output")]
    (h,) = [h for h in got if h.model == "trt" and h.tokens == "input"]
    assert h == TokenHistogram("s", "trt", "1", "input", snap.models[("trt", "1")].dists[IN].buckets, 320.0, 8.0)
