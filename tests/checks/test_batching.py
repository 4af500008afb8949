"""The batching advisor on recorded Triton configs and counter series."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from prometheus_client import CollectorRegistry

from sidecar.alerting.render import finding_text
from sidecar.checks.batching.check import BatchingAdvisor, advise
from sidecar.checks.batching.config import BatchingConfig
from sidecar.clock import FakeClock
from sidecar.model import Batch, Sample
from sidecar.sources.triton_model_api import config_samples

# GET /v2/models/slow/config of a real Triton 2.51: max_batch_size 8, preferred 4, delay 5000 us.
SLOW_CONFIG = json.loads((Path(__file__).parents[1] / "data" / "triton-2.51-model-config-slow.json").read_text())


def window(rate: float, fill: float, queue_us: float, secs: float = 300) -> dict[str, float]:
    n = rate * secs
    return {"requests": n, "executions": n / fill, "queue_count": n, "queue_ns": n * queue_us * 1000, "secs": secs}


def test_a_short_delay_with_thin_batches_is_too_short_and_says_what_to_try() -> None:
    a = advise(
        **window(1000, 1.1, 80),
        max_batch_size=16,
        dynamic=True,
        delay_us=100,
        preferred=None,
        max_wait_us=10_000,
        min_requests=100,
    )
    # 15 more requests need 15 ms at 1000/s; the accepted wait caps the suggestion at 10 ms.
    assert (a.verdict, a.suggested_delay_us, a.target) == ("too_short", 10_000, 16)
    a = advise(
        **window(1000, 1.1, 80),
        max_batch_size=16,
        dynamic=True,
        delay_us=100,
        preferred=4,
        max_wait_us=10_000,
        min_requests=100,
    )
    assert (a.verdict, a.suggested_delay_us) == ("too_short", 3000)


def test_a_long_delay_that_gathers_nothing_is_too_long() -> None:
    a = advise(
        **window(20, 1.0, 4800),
        max_batch_size=8,
        dynamic=True,
        delay_us=5000,
        preferred=None,
        max_wait_us=10_000,
        min_requests=100,
    )
    assert (a.verdict, a.suggested_delay_us) == ("too_long", 0)
    a = advise(
        **window(2000, 3.0, 18_000),
        max_batch_size=64,
        dynamic=True,
        delay_us=20_000,
        preferred=None,
        max_wait_us=10_000,
        min_requests=100,
    )
    assert (a.verdict, a.suggested_delay_us) == ("too_long", 10_000)  # above the accepted wait


def test_queue_time_far_above_the_delay_is_saturation_not_a_delay_problem() -> None:
    a = advise(
        **window(800, 7.9, 50_000),
        max_batch_size=8,
        dynamic=True,
        delay_us=2000,
        preferred=None,
        max_wait_us=10_000,
        min_requests=100,
    )
    assert a.verdict == "saturated" and a.suggested_delay_us is None


def test_batchable_traffic_without_dynamic_batching_is_told_to_enable_it() -> None:
    a = advise(
        **window(500, 1.0, 50),
        max_batch_size=8,
        dynamic=False,
        delay_us=None,
        preferred=None,
        max_wait_us=10_000,
        min_requests=100,
    )
    assert (a.verdict, a.suggested_delay_us) == ("enable", 10_000)
    thin = advise(
        **window(5, 1.0, 50),
        max_batch_size=8,
        dynamic=False,
        delay_us=None,
        preferred=None,
        max_wait_us=10_000,
        min_requests=100,
    )
    assert thin.verdict == "ok"


def test_full_batches_and_too_little_traffic_get_no_advice() -> None:
    full = advise(
        **window(2000, 7.5, 2500),
        max_batch_size=8,
        dynamic=True,
        delay_us=5000,
        preferred=None,
        max_wait_us=10_000,
        min_requests=100,
    )
    assert full.verdict == "ok"
    few = advise(
        **window(0.1, 1.0, 4000),
        max_batch_size=8,
        dynamic=True,
        delay_us=5000,
        preferred=None,
        max_wait_us=10_000,
        min_requests=100,
    )
    assert few.verdict == "insufficient"
    one = advise(
        **window(100, 1.0, 0),
        max_batch_size=0,
        dynamic=False,
        delay_us=None,
        preferred=None,
        max_wait_us=10_000,
        min_requests=100,
    )
    assert one.verdict == "not_batchable"


def stats(model: str, version: str, inf: float, execs: float, qn: float, qns: float) -> list[Sample]:
    vals = {"inference_count": inf, "execution_count": execs, "queue_count": qn, "queue_ns": qns}
    return [
        Sample("triton_model_stats", (("model", model), ("stat", k), ("version", version)), v) for k, v in vals.items()
    ]


def feed(adv: BatchingAdvisor, at: float, items: list[Sample]) -> None:
    adv.observe(Batch(kind="samples", source="triton_model_api", items=tuple(items), received_at=at, complete=True))


def test_the_advisor_reads_a_real_config_and_a_counter_series(clock: FakeClock) -> None:
    reg = CollectorRegistry()
    adv = BatchingAdvisor(BatchingConfig(enabled=True, window_secs=60, min_requests=50), registry=reg)
    cfg = config_samples("slow", SLOW_CONFIG)
    t0 = clock.now()
    # 10 requests/s, one per execution, each waiting the whole 5 ms delay: at 10/s a 10 ms wait gathers 0.1.
    for i in range(0, 13):
        n = 10.0 * 5 * i
        feed(adv, t0 + 5 * i, cfg + stats("slow", "1", n, n, n, n * 5_000_000))
    (f,) = adv.evaluate(t0 + 60)
    assert f.kind == "advice" and f.severity == "info" and f.active
    assert f.facts["verdict"] == "too_long" and f.facts["target"] == 4 and f.window_secs == 60
    assert f.facts["rate"] == pytest.approx(10.0) and f.facts["queue_us"] == pytest.approx(5000)
    summary, description = finding_text(f)
    assert summary == "slow v1: max_queue_delay_microseconds 5000 too long, try 0"
    assert "600 inferences at 10/s, 1.00 per execution (target batch 4, max_batch_size 8)" in description
    lab = {"model": "slow", "version": "1"}
    assert reg.get_sample_value("sidecar_batching_verdict", {**lab, "verdict": "too_long"}) == 1
    assert reg.get_sample_value("sidecar_batching_suggested_delay_microseconds", lab) == 0

    # Traffic rises to 2000/s in full batches of 4: the old window ages out and the verdict turns ok.
    n0 = 10.0 * 5 * 12
    for i in range(1, 14):
        n = n0 + 2000 * 5 * i
        feed(adv, t0 + 60 + 5 * i, cfg + stats("slow", "1", n, n0 / 1 + (n - n0) / 4, n, n0 * 5e6 + (n - n0) * 1e6))
    (f,) = adv.evaluate(t0 + 125)
    assert f.facts["verdict"] == "ok" and not f.active
    assert reg.get_sample_value("sidecar_batching_verdict", {**lab, "verdict": "too_long"}) is None
    assert reg.get_sample_value("sidecar_batching_verdict", {**lab, "verdict": "ok"}) == 1
    assert reg.get_sample_value("sidecar_batching_suggested_delay_microseconds", lab) is None


def test_a_counter_restart_starts_the_window_over_and_an_unloaded_version_is_forgotten(clock: FakeClock) -> None:
    reg = CollectorRegistry()
    adv = BatchingAdvisor(BatchingConfig(enabled=True, window_secs=60, min_requests=50), registry=reg)
    cfg = config_samples("slow", SLOW_CONFIG)
    t0 = clock.now()
    feed(adv, t0, cfg + stats("slow", "1", 5000, 5000, 5000, 5000 * 5e6))
    feed(adv, t0 + 5, cfg + stats("slow", "1", 10, 10, 10, 10 * 5e6))  # reloaded: counters from 0
    assert adv.evaluate(t0 + 6) == []  # one point since the restart: nothing to compare yet
    feed(adv, t0 + 10, cfg + stats("slow", "1", 20, 20, 20, 20 * 5e6))
    (f,) = adv.evaluate(t0 + 11)
    assert f.insufficient_data and f.facts["requests"] == 10
    assert "needs more traffic" in finding_text(f)[0]
    feed(adv, t0 + 15, [])
    assert adv.evaluate(t0 + 16) == [] and adv.series == {} and adv.configs == {}
    assert (
        reg.get_sample_value("sidecar_batching_verdict", {"model": "slow", "version": "1", "verdict": "insufficient"})
        is None
    )


def test_config_samples_of_a_model_without_dynamic_batching() -> None:
    cfg = {k: v for k, v in SLOW_CONFIG.items() if k != "dynamic_batching"}
    got = {dict(s.labels)["field"]: s.value for s in config_samples("slow", cfg)}
    assert got == {"max_batch_size": 8.0, "dynamic_batching": 0.0}
    assert config_samples("slow", ["not", "a", "config"]) == []
