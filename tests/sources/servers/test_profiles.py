"""Each profile maps its server's own exposition (built from the server's source) onto the schema."""

from __future__ import annotations

import math
from collections.abc import Callable

import pytest

from sidecar.promtext import parse_exposition
from sidecar.sources.servers import PROFILES, Counter, DistName, Gauge, Limits, detect, map_exposition
from sidecar.sources.servers.mapping import parse_units
from sidecar.sources.servers.registry import family_names
from sidecar.sources.servers.schema import ServingSnapshot

LLAMA = ("meta-llama/Llama-3.1-8B-Instruct", "")


def _map(text: str, profile: str | None = None, limits: Limits = Limits()) -> ServingSnapshot:
    expo = parse_exposition(text)
    prof = PROFILES[profile] if profile else detect(family_names((n for n, _l, _v in expo.samples), expo.types))
    assert prof is not None
    return map_exposition(expo, prof, server="s", taken_at=0.0, limits=limits, units=parse_units(text))


@pytest.mark.parametrize("name", ["vllm-current.prom", "vllm-0.8.prom"])
def test_vllm_both_generations_map_to_the_same_slis(fixture_text: Callable[[str], str], name: str) -> None:
    snap = _map(fixture_text(name))
    assert snap.profile == "vllm"
    m = snap.models[LLAMA]
    # Two engines of one model are summed: stop 8 + length 1 per engine are successes, abort is its own outcome.
    assert dict(m.requests) == {"success": 18, "aborted": 2, "failure": 0}
    assert m.counters[Counter.INPUT_TOKENS] == 2000
    assert m.counters[Counter.OUTPUT_TOKENS] == 800
    assert m.counters[Counter.PREEMPTIONS] == 2
    assert m.gauges[Gauge.IN_FLIGHT] == 6 and m.gauges[Gauge.WAITING] == 4
    assert m.gauges[Gauge.KV_CACHE_USAGE] == 0.5  # a ratio: the fuller engine, not a sum
    ttft = m.dists[DistName.TIME_TO_FIRST_TOKEN]
    assert (ttft.count, ttft.sum) == (20, pytest.approx(1.0))
    assert ttft.buckets[0] == (0.001, 0) and ttft.buckets[-1] == (math.inf, 20)
    itl = m.dists[DistName.INTER_TOKEN_LATENCY]  # inter_token_latency_seconds, or its older name
    assert (itl.count, itl.sum) == (80, pytest.approx(1.6))
    assert m.dists[DistName.REQUEST_DURATION].sum == pytest.approx(40.0)
    assert m.dists[DistName.QUEUE_DURATION].sum == pytest.approx(8.0)
    assert m.dists[DistName.COMPUTE_DURATION].sum == pytest.approx(32.0)
    assert (DistName.TIME_PER_OUTPUT_TOKEN in m.dists) == (name == "vllm-current.prom")
    assert snap.refused == ()


def test_a_renamed_family_exposed_under_both_names_is_read_once(fixture_text: Callable[[str], str]) -> None:
    old = fixture_text("vllm-0.8.prom")
    itl_old = "".join(line + "\n" for line in old.splitlines() if "time_per_output_token_seconds" in line)
    snap = _map(fixture_text("vllm-current.prom") + itl_old)
    itl = snap.models[LLAMA].dists[DistName.INTER_TOKEN_LATENCY]
    assert itl.count == 80  # not 160
    assert "vllm:time_per_output_token_seconds" not in snap.families


def test_triton_counters_and_first_response_histogram(fixture_text: Callable[[str], str]) -> None:
    snap = _map(fixture_text("triton-histograms.prom"))
    assert snap.profile == "triton"
    m = snap.models[("resnet", "1")]
    assert dict(m.requests) == {"success": 90, "failure": 8, "aborted": 2}
    e2e = m.dists[DistName.REQUEST_DURATION]
    assert (e2e.sum, e2e.count) == (pytest.approx(1.0), 100)  # 1e6 us over success + failure
    assert m.dists[DistName.QUEUE_DURATION].sum == pytest.approx(0.2)
    compute = m.dists[DistName.COMPUTE_DURATION]
    assert (compute.sum, compute.count) == (pytest.approx(0.45), 90)
    batch = m.dists[DistName.BATCH_SIZE]
    assert batch.sum / batch.count == 4
    assert m.gauges[Gauge.WAITING] == 7
    first = m.dists[DistName.FIRST_RESPONSE]
    assert first.sum == pytest.approx(25.0)  # 25000 ms
    assert first.buckets == ((0.1, 40), (0.5, 90), (2.0, 100), (5.0, 100), (math.inf, 100))
    assert DistName.TIME_TO_FIRST_TOKEN not in m.dists  # a first response is a chunk, not a token


@pytest.mark.parametrize(
    ("family", "scale", "raw_sum", "seconds"),
    [
        ("nv_inference_request_duration_us", "us", 2_500_000, 2.5),
        ("nv_inference_first_response_histogram_ms", "ms", 2_500, 2.5),
        ("vllm:e2e_request_latency_seconds", "s", 2.5, 2.5),
    ],
)
def test_units_convert_to_seconds(family: str, scale: str, raw_sum: float, seconds: float) -> None:
    if scale == "us":
        text = f'nv_inference_request_duration_us{{model="m",version="1"}} {raw_sum}\n'
        text += 'nv_inference_request_success{model="m",version="1"} 1\n'
        dist = _map(text, "triton").models[("m", "1")].dists[DistName.REQUEST_DURATION]
    else:
        labels = 'model="m",version="1"' if scale == "ms" else 'model_name="m"'
        text = f"{family}_sum{{{labels}}} {raw_sum}\n{family}_count{{{labels}}} 1\n"
        text += f'{family}_bucket{{{labels},le="+Inf"}} 1\n'
        snap = _map(text, "triton" if scale == "ms" else "vllm")
        key = ("m", "1") if scale == "ms" else ("m", "")
        name = DistName.FIRST_RESPONSE if scale == "ms" else DistName.REQUEST_DURATION
        dist = snap.models[key].dists[name]
    assert dist.sum == pytest.approx(seconds)


def test_detection_picks_the_server_and_matches_nothing_else(fixture_text: Callable[[str], str]) -> None:
    for name, want in (("vllm-current.prom", "vllm"), ("vllm-0.8.prom", "vllm"), ("triton-histograms.prom", "triton")):
        expo = parse_exposition(fixture_text(name))
        got = detect(family_names((n for n, _l, _v in expo.samples), expo.types))
        assert got is not None and got.name == want
    assert detect({"process_cpu_seconds_total", "python_info"}) is None
