"""Bad input is refused per family, with a reason, and never shows as a zero."""

from __future__ import annotations

from sidecar.promtext import parse_exposition
from sidecar.sources.servers import PROFILES, Gauge, Limits, map_exposition
from sidecar.sources.servers.mapping import parse_units
from sidecar.sources.servers.schema import DistName, ServingSnapshot

GOOD = 'vllm:num_requests_waiting{model_name="m",engine="0"} 2\n'


def _map(text: str, limits: Limits = Limits()) -> ServingSnapshot:
    return map_exposition(
        parse_exposition(text), PROFILES["vllm"], server="s", taken_at=0.0, limits=limits, units=parse_units(text)
    )


def test_wrong_type_is_refused_and_the_rest_kept() -> None:
    text = "# TYPE vllm:num_requests_running counter\n" + 'vllm:num_requests_running{model_name="m"} 5\n' + GOOD
    snap = _map(text)
    assert [(r.family, r.reason) for r in snap.refused] == [("vllm:num_requests_running", "wrong_type")]
    gauges = snap.models[("m", "")].gauges
    assert Gauge.IN_FLIGHT not in gauges  # absent, not zero
    assert gauges[Gauge.WAITING] == 2


def test_nan_and_inf_samples_refuse_their_family() -> None:
    for bad in ("NaN", "+Inf", "-Inf"):
        snap = _map(f'vllm:kv_cache_usage_perc{{model_name="m"}} {bad}\n' + GOOD)
        assert [(r.family, r.reason) for r in snap.refused] == [("vllm:kv_cache_usage_perc", "non_finite")]
        assert Gauge.KV_CACHE_USAGE not in snap.models[("m", "")].gauges


def test_a_negative_count_is_refused() -> None:
    snap = _map('vllm:prompt_tokens_total{model_name="m"} -3\n' + GOOD)
    assert [r.reason for r in snap.refused] == ["negative"]


def test_an_unexpected_unit_is_refused() -> None:
    fam = "vllm:e2e_request_latency_seconds"
    text = f"# TYPE {fam} histogram\n# UNIT {fam} milliseconds\n"
    text += f'{fam}_sum{{model_name="m"}} 2000\n{fam}_count{{model_name="m"}} 1\n' + GOOD
    snap = _map(text)
    assert [(r.family, r.reason) for r in snap.refused] == [(fam, "unit")]
    assert DistName.REQUEST_DURATION not in snap.models[("m", "")].dists


def test_a_label_set_beyond_limits_is_refused() -> None:
    long_name = "x" * 300
    snap = _map(f'vllm:num_requests_running{{model_name="{long_name}"}} 1\n' + GOOD)
    assert [r.reason for r in snap.refused] == ["labels"]
    many = _map('vllm:num_requests_running{model_name="m",a="1",b="2",c="3"} 1\n' + GOOD, Limits(max_labels=2))
    assert [r.reason for r in many.refused] == ["labels"]


def test_a_bucket_without_numeric_le_is_refused() -> None:
    fam = "vllm:time_to_first_token_seconds"
    text = (
        f'{fam}_bucket{{model_name="m",le="soon"}} 1\n{fam}_sum{{model_name="m"}} 1\n{fam}_count{{model_name="m"}} 1\n'
    )
    assert [r.reason for r in _map(text).refused] == ["labels"]


def test_models_beyond_the_limit_are_dropped_and_counted() -> None:
    text = "".join(f'vllm:num_requests_running{{model_name="m{i}"}} 1\n' for i in range(5))
    snap = _map(text, Limits(max_models=3))
    assert len(snap.models) == 3
    assert snap.models_refused == 2


def test_labels_parsed_on_demand_refuse_only_the_family_that_holds_a_malformed_set() -> None:
    text = 'vllm:num_requests_running{model_name="m",stray} 1\n' + GOOD
    text += "unrelated_family{oops} 1\n"  # never mapped, never parsed
    expo = parse_exposition(text, eager_labels=False)
    snap = map_exposition(expo, PROFILES["vllm"], server="s", taken_at=0.0)
    assert [(r.family, r.reason) for r in snap.refused] == [("vllm:num_requests_running", "labels")]
    assert snap.models[("m", "")].gauges[Gauge.WAITING] == 2


def test_bucket_lines_that_differ_in_more_than_le_keep_their_own_labels() -> None:
    fam = "vllm:time_to_first_token_seconds"
    rows = []
    for model in ("m1", "m2"):  # one run of bucket lines holding two series, le before and after other labels
        for le in ("0.1", "+Inf"):
            rows.append(f'{fam}_bucket{{le="{le}",model_name="{model}"}} {1 if model == "m1" else 2}\n')
    text = "".join(rows) + "".join(
        f'{fam}_sum{{model_name="{m}"}} 1\n{fam}_count{{model_name="{m}"}} {n}\n' for m, n in (("m1", 1), ("m2", 2))
    )
    snap = _map(text)
    assert snap.models[("m1", "")].dists[DistName.TIME_TO_FIRST_TOKEN].buckets[-1][1] == 1
    assert snap.models[("m2", "")].dists[DistName.TIME_TO_FIRST_TOKEN].buckets[-1][1] == 2
