from __future__ import annotations

import pytest
from prometheus_client import CollectorRegistry
from prometheus_client.registry import Collector

from sidecar.processors.derive import Deriver, snapshot_models
from sidecar.processors.ratio_window import RatioWindow
from sidecar.promtext import parse_exposition


def scrape(
    success: dict[tuple[str, str], float],
    failures: dict[tuple[str, str, str], float] | None = None,
    queue_us: float = 0.0,
    execs: float | None = None,
) -> str:
    lines = []
    for (m, v), n in success.items():
        lines.append(f'nv_inference_request_success{{model="{m}",version="{v}"}} {n}')
        lines.append(f'nv_inference_count{{model="{m}",version="{v}"}} {n}')
        lines.append(f'nv_inference_exec_count{{model="{m}",version="{v}"}} {execs if execs is not None else n}')
        lines.append(f'nv_inference_queue_duration_us{{model="{m}",version="{v}"}} {queue_us}')
        lines.append(f'nv_inference_pending_request_count{{model="{m}",version="{v}"}} 3')
        lines.append(f'nv_inference_queue_summary_us{{model="{m}",version="{v}",quantile="0.99"}} 2500')
        lines.append(f'nv_inference_queue_summary_us_count{{model="{m}",version="{v}"}} {n}')
        lines.append(f'nv_inference_queue_summary_us_sum{{model="{m}",version="{v}"}} {queue_us}')
    for (m, v, r), n in (failures or {}).items():
        lines.append(f'nv_inference_request_failure{{model="{m}",reason="{r}",version="{v}"}} {n}')
    return "\n".join(lines) + "\n"


def feed(d: Deriver, text: str, t: float) -> None:
    models, passthrough, _ = snapshot_models(parse_exposition(text), 100)
    d.update(models, passthrough, t)


def exposition(d: Deriver) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    reg = CollectorRegistry()

    class C(Collector):
        def collect(self):  # type: ignore[no-untyped-def]
            return d.collect()

    reg.register(C())
    out = {}
    for fam in reg.collect():
        for s in fam.samples:
            out[(s.name, tuple(sorted(s.labels.items())))] = s.value
    return out


K = (("model", "ctr"), ("version", "1"))


def test_rates_error_ratio_by_reason_stage_average_and_batch_efficiency() -> None:
    d = Deriver()
    feed(d, scrape({("ctr", "1"): 100}, {("ctr", "1", "BACKEND"): 0}, queue_us=1000, execs=50), 0.0)
    feed(d, scrape({("ctr", "1"): 160}, {("ctr", "1", "BACKEND"): 20}, queue_us=13000, execs=70), 10.0)
    e = exposition(d)
    assert e[("sidecar_model_requests_per_second", K)] == 8.0  # (60 ok + 20 failed) / 10 s
    assert e[("sidecar_model_successes_per_second", K)] == 6.0
    assert e[("sidecar_model_failures_per_second", (("model", "ctr"), ("reason", "BACKEND"), ("version", "1")))] == 2.0
    assert e[("sidecar_model_error_ratio", K)] == 0.25
    # 12,000 us of queueing over 60 successful requests = 200 us each.
    assert abs(e[("sidecar_model_stage_average_seconds", (*K[:1], ("stage", "queue"), K[1]))] - 0.0002) < 1e-12
    assert e[("sidecar_model_inferences_per_execution", K)] == 3.0  # 60 inferences over 20 executions
    assert e[("sidecar_model_pending_requests", K)] == 3.0
    assert (
        e[
            (
                "sidecar_model_stage_latency_seconds",
                (("model", "ctr"), ("quantile", "0.99"), ("stage", "queue"), ("version", "1")),
            )
        ]
        == 0.0025
    )
    assert (
        e[("sidecar_model_stage_latency_seconds_count", (("model", "ctr"), ("stage", "queue"), ("version", "1")))]
        == 160
    )


def test_counter_reset_is_handled_like_prometheus_rate_never_negative() -> None:
    d = Deriver()
    feed(d, scrape({("ctr", "1"): 1000}), 0.0)
    feed(d, scrape({("ctr", "1"): 1100}), 10.0)
    feed(d, scrape({("ctr", "1"): 30}), 20.0)  # Triton restarted: counters start again from zero
    e = exposition(d)
    assert e[("sidecar_model_requests_per_second", K)] == 3.0  # 30 since the reset, not -107
    assert d.resets >= 1
    # The reset-corrected total keeps growing through the restart.
    assert e[("sidecar_model_request_success_total", K)] == 1130.0


def test_first_scrape_has_no_rates_and_a_vanished_version_disappears() -> None:
    d = Deriver()
    feed(d, scrape({("ctr", "1"): 10, ("ctr", "2"): 5}), 0.0)
    assert not any(k[0] == "sidecar_model_requests_per_second" for k in exposition(d))
    feed(d, scrape({("ctr", "1"): 20, ("ctr", "2"): 6}), 5.0)
    feed(d, scrape({("ctr", "1"): 30}), 10.0)  # version 2 unloaded
    e = exposition(d)
    versions = {dict(k[1])["version"] for k in e if k[0].startswith("sidecar_model_")}
    assert versions == {"1"}


def test_no_traffic_gives_zero_rate_and_no_error_ratio() -> None:
    d = Deriver()
    feed(d, scrape({("ctr", "1"): 10}, {("ctr", "1", "OTHER"): 0}), 0.0)
    feed(d, scrape({("ctr", "1"): 10}, {("ctr", "1", "OTHER"): 0}), 5.0)
    e = exposition(d)
    assert e[("sidecar_model_requests_per_second", K)] == 0.0
    assert ("sidecar_model_error_ratio", K) not in e


def test_stale_marking_withdraws_interval_values() -> None:
    d = Deriver()
    feed(d, scrape({("ctr", "1"): 10}), 0.0)
    feed(d, scrape({("ctr", "1"): 20}), 5.0)
    d.mark_stale()
    e = exposition(d)
    assert not any(k[0] in ("sidecar_model_requests_per_second", "sidecar_model_pending_requests") for k in e)
    assert e[("sidecar_model_request_success_total", K)] == 20.0


def test_model_cardinality_limit_refuses_new_pairs() -> None:
    text = scrape({("a", "1"): 1, ("b", "1"): 1, ("c", "1"): 1})
    models, _, refused = snapshot_models(parse_exposition(text), 2)
    assert set(models) == {("a", "1"), ("b", "1")}
    assert refused == 1


def test_gpu_series_are_joined_on_uuid() -> None:
    d = Deriver()
    text = 'nv_gpu_utilization{gpu_uuid="GPU-1"} 0.5\nnv_gpu_power_usage{gpu_uuid="GPU-2"} 70\n'
    models, passthrough, _ = snapshot_models(parse_exposition(text), 10)
    d.update(models, passthrough, 0.0)
    fams = {f.name: f for f in d.collect({"GPU-1": {"index": "0", "name": "NVIDIA H100"}})}
    util = fams["sidecar_triton_gpu_utilization_ratio"].samples[0]
    assert util.labels == {"gpu_uuid": "GPU-1", "gpu": "0", "gpu_name": "NVIDIA H100"}
    power = fams["sidecar_triton_gpu_power_usage_watts"].samples[0]
    assert power.labels["gpu"] == "" and power.value == 70


def leftovers(m: str, v: str) -> str:
    """What Triton 2.51 keeps exporting for a version unloaded in explicit mode: its four failure series at 0."""
    return "".join(
        f'nv_inference_request_failure{{model="{m}",reason="{r}",version="{v}"}} 0\n'
        for r in ("BACKEND", "CANCELED", "OTHER", "REJECTED")
    )


def model_series(e: dict[tuple[str, tuple[tuple[str, str], ...]], float], model: str) -> set[str]:
    return {k[0] for k in e if k[0].startswith("sidecar_model_") and dict(k[1]).get("model") == model}


def test_an_unloaded_version_with_only_leftover_failure_series_is_not_a_model() -> None:
    d = Deriver()
    feed(d, scrape({("ctr", "1"): 10, ("ctr", "2"): 5}), 0.0)
    feed(d, scrape({("ctr", "1"): 20, ("ctr", "2"): 6}), 5.0)
    feed(d, scrape({("ctr", "1"): 30}) + leftovers("ctr", "2"), 10.0)  # version 2 unloaded
    assert d.models == [("ctr", "1")]
    e = exposition(d)
    assert {dict(k[1])["version"] for k in e if k[0].startswith("sidecar_model_")} == {"1"}
    assert ("sidecar_model_successes_per_second", (("model", "ctr"), ("version", "2"))) not in e


def test_requests_served_between_a_reload_and_the_next_scrape_are_counted() -> None:
    d = Deriver()
    k2 = (("model", "ctr"), ("version", "2"))
    feed(d, scrape({("ctr", "1"): 10, ("ctr", "2"): 10}), 0.0)
    feed(d, scrape({("ctr", "1"): 20}) + leftovers("ctr", "2"), 5.0)  # v2 unloaded
    feed(d, scrape({("ctr", "1"): 30, ("ctr", "2"): 5}), 10.0)  # reloaded, 5 served, counters from zero
    e = exposition(d)
    assert e[("sidecar_model_successes_per_second", k2)] == 1.0  # 5 over the 5 s interval, not 0
    assert e[("sidecar_model_request_success_total", k2)] == 15.0  # 10 before the unload + 5 after
    assert e[("sidecar_triton_model_resets_total", k2)] == 1.0  # the reload is one reset
    assert e[("sidecar_triton_model_resets_total", K)] == 0.0


def test_a_version_first_loaded_after_a_good_scrape_counts_its_first_value() -> None:
    d = Deriver()
    feed(d, scrape({("ctr", "1"): 10}), 0.0)
    feed(d, scrape({("ctr", "1"): 10, ("ctr", "2"): 5}), 5.0)
    e = exposition(d)
    k2 = (("model", "ctr"), ("version", "2"))
    assert e[("sidecar_model_successes_per_second", k2)] == 1.0
    assert e[("sidecar_model_request_success_total", k2)] == 5.0
    assert e[("sidecar_triton_model_resets_total", k2)] == 0.0  # a new version is not a reset


def test_a_restart_counts_one_reset_per_version_and_series_resets_per_series() -> None:
    d = Deriver()
    feed(d, scrape({("ctr", "1"): 100, ("ctr", "2"): 100}, queue_us=500), 0.0)
    feed(d, scrape({("ctr", "1"): 3, ("ctr", "2"): 2}, queue_us=100), 5.0)
    e = exposition(d)
    assert e[("sidecar_triton_model_resets_total", K)] == 1.0
    assert e[("sidecar_triton_model_resets_total", (("model", "ctr"), ("version", "2")))] == 1.0
    assert d.resets == 8  # success, inferences, executions, queue_us for each of 2 versions


def test_inferences_per_execution_counts_like_with_like_when_half_the_requests_fail() -> None:
    # No batching: 10 requests, 5 fail in the backend. Triton: success +5, inferences +5, executions +10.
    d = Deriver()
    feed(d, scrape({("ctr", "1"): 0}, {("ctr", "1", "BACKEND"): 0}, execs=0), 0.0)
    feed(d, scrape({("ctr", "1"): 5}, {("ctr", "1", "BACKEND"): 5}, execs=10), 5.0)
    e = exposition(d)
    assert e[("sidecar_model_inferences_per_execution", K)] == 1.0
    assert e[("sidecar_model_error_ratio", K)] == 0.5


def test_inferences_per_execution_with_batches_of_four_and_one_failure_is_four() -> None:
    # The recorded fraud numbers (tests/data/core/triton-2.51-metrics.txt): 79 successful requests of 4 items,
    # one failed; Triton counts 316 inferences and 80 executions (the failed one included).
    d = Deriver()
    feed(d, scrape({("ctr", "1"): 0}, {("ctr", "1", "BACKEND"): 0}, execs=0), 0.0)
    text = scrape({("ctr", "1"): 79}, {("ctr", "1", "BACKEND"): 1}, execs=80).replace(
        'nv_inference_count{model="ctr",version="1"} 79', 'nv_inference_count{model="ctr",version="1"} 316'
    )
    feed(d, text, 5.0)
    assert exposition(d)[("sidecar_model_inferences_per_execution", K)] == 4.0


def test_inferences_per_execution_never_reads_below_one() -> None:
    d = Deriver()
    feed(d, scrape({("ctr", "1"): 0}, {("ctr", "1", "OTHER"): 0}, execs=0), 0.0)
    feed(d, scrape({("ctr", "1"): 9}, {("ctr", "1", "OTHER"): 1}, execs=10), 5.0)
    assert exposition(d)[("sidecar_model_inferences_per_execution", K)] == 1.0


def test_ratios_are_computed_over_the_window_not_the_last_interval() -> None:
    d = Deriver(ratio_window_s=60.0)
    ok, bad = 0, 0
    feed(d, scrape({("ctr", "1"): ok}, {("ctr", "1", "BACKEND"): bad}), 0.0)
    ratios = []
    for i in range(1, 25):  # one failure every third 5 s interval, 10 requests per interval
        failed = 1 if i % 3 == 0 else 0
        ok, bad = ok + 10 - failed, bad + failed
        feed(d, scrape({("ctr", "1"): ok}, {("ctr", "1", "BACKEND"): bad}), 5.0 * i)
        ratios.append(exposition(d)[("sidecar_model_error_ratio", K)])
    # Once the 60 s window is full (12 intervals, 4 failures in 120 requests) the ratio is steady.
    assert ratios[11:] == [pytest.approx(4 / 120)] * len(ratios[11:])
    # Per interval it would swing between 0 and 0.1.
    assert min(ratios[2:]) > 0


def test_ratio_window_forgets_intervals_older_than_the_window() -> None:
    d = Deriver(ratio_window_s=10.0)
    feed(d, scrape({("ctr", "1"): 0}, {("ctr", "1", "BACKEND"): 0}), 0.0)
    feed(d, scrape({("ctr", "1"): 0}, {("ctr", "1", "BACKEND"): 10}), 5.0)  # all failed
    feed(d, scrape({("ctr", "1"): 10}, {("ctr", "1", "BACKEND"): 10}), 10.0)
    assert exposition(d)[("sidecar_model_error_ratio", K)] == 0.5
    feed(d, scrape({("ctr", "1"): 20}, {("ctr", "1", "BACKEND"): 10}), 15.0)  # the failing interval is out
    assert exposition(d)[("sidecar_model_error_ratio", K)] == 0.0


def test_ratio_window_holds_at_most_max_entries() -> None:
    w = RatioWindow(window_s=1e9, max_entries=3)
    for t in range(5):
        sums = w.add(float(t), (1.0, 0.0, 0.0, 0.0, 0.0, 0.0))
    assert sums[0] == 3.0


def test_totals_of_gone_versions_are_kept_for_at_most_max_models_versions() -> None:
    d = Deriver(max_models=2)
    feed(d, scrape({("a", "1"): 10, ("b", "1"): 10, ("c", "1"): 10}), 0.0)
    feed(d, scrape({("d", "1"): 1}), 5.0)  # a, b and c gone: only the two latest are kept
    feed(d, scrape({("a", "1"): 2, ("c", "1"): 2, ("d", "1"): 1}), 10.0)
    e = exposition(d)
    a, c = (("model", "a"), ("version", "1")), (("model", "c"), ("version", "1"))
    assert e[("sidecar_model_request_success_total", a)] == 2.0  # forgotten: starts again
    assert e[("sidecar_triton_model_resets_total", a)] == 0.0
    assert e[("sidecar_model_request_success_total", c)] == 12.0  # continued through the reload
    assert e[("sidecar_triton_model_resets_total", c)] == 1.0


def test_leftover_failure_series_are_not_counted_as_refused_models() -> None:
    text = scrape({("a", "1"): 1, ("b", "1"): 1}) + leftovers("gone", "1")
    models, _, refused = snapshot_models(parse_exposition(text), 2)
    assert set(models) == {("a", "1"), ("b", "1")}
    assert refused == 0
