"""The server source end to end on a mock transport and a fake clock: scrape, detect, map, derive, export."""

from __future__ import annotations

from collections.abc import Callable

import httpx
import pytest
from prometheus_client import CollectorRegistry

from sidecar.clock import FakeClock
from sidecar.polled import ManualTicker
from sidecar.sources.servers.config import ServingTargetConfig
from sidecar.sources.servers.export import ServingExport
from sidecar.sources.servers.source import ServerSource
from sidecar.sources.servers.telemetry import ServerTelemetry


class Target:
    """What the fake server answers next."""

    def __init__(self, text: str = "", status: int = 200) -> None:
        self.text, self.status = text, status

    def __call__(self, request: httpx.Request) -> httpx.Response:
        return httpx.Response(self.status, text=self.text, headers={"content-type": "text/plain; version=0.0.4"})


def _source(target: Target, registry: CollectorRegistry, clock: FakeClock, **cfg: object) -> ServerSource:
    config = ServingTargetConfig.model_validate({"name": "llm", "url": "http://llm:8000/metrics", **cfg})
    return ServerSource(
        config,
        registry=registry,
        clock=clock,
        http=httpx.AsyncClient(transport=httpx.MockTransport(target)),
        export=ServingExport(registry),
        telemetry=ServerTelemetry(registry),
        ticker=ManualTicker,
    )


def _v(registry: CollectorRegistry, name: str, **labels: str) -> float | None:
    return registry.get_sample_value(name, labels)


def _vllm(success: float, ttft_count: float, ttft_sum: float, extra: str = "") -> str:
    fam = "vllm:time_to_first_token_seconds"
    m = 'model_name="m",engine="0"'
    return (
        f'vllm:request_success_total{{{m},finished_reason="stop"}} {success}\n'
        f'vllm:request_success_total{{{m},finished_reason="error"}} 0\n'
        f"vllm:kv_cache_usage_perc{{{m}}} 0.5\n"
        f'{fam}_bucket{{{m},le="0.1"}} {ttft_count / 2}\n{fam}_bucket{{{m},le="+Inf"}} {ttft_count}\n'
        f"{fam}_sum{{{m}}} {ttft_sum}\n{fam}_count{{{m}}} {ttft_count}\n" + extra
    )


async def test_rates_quantiles_and_gauges_from_two_scrapes() -> None:
    reg, clock, target = CollectorRegistry(), FakeClock(), Target(_vllm(100, 10, 1.0))
    src = _source(target, reg, clock)
    assert await src.scrape_once()
    lab = {"server": "llm", "model": "m", "version": ""}
    assert _v(reg, "sidecar_serving_kv_cache_usage", **lab) == 0.5  # a gauge is known at once
    assert _v(reg, "sidecar_serving_requests_per_second", **lab, outcome="success") is None  # no interval yet
    clock.advance(10)
    target.text = _vllm(150, 30, 4.0)
    assert await src.scrape_once()
    assert _v(reg, "sidecar_serving_requests_per_second", **lab, outcome="success") == pytest.approx(5.0)
    assert _v(reg, "sidecar_serving_requests_total", **lab, outcome="success") == 50  # counted from the first scrape
    ttft = "sidecar_serving_gen_ai_server_time_to_first_token_seconds"
    assert _v(reg, ttft, **lab, stat="avg") == pytest.approx(3.0 / 20)
    assert _v(reg, ttft, **lab, stat="p50") == pytest.approx(0.1)  # 10 of 20 at or below 0.1 s
    assert _v(reg, "sidecar_serving_error_ratio", **lab) == 0.0
    assert src.readiness().ok and "vllm profile, 1 models" in src.readiness().detail
    assert _v(reg, "sidecar_server_profile_info", server="llm", profile="vllm") == 1


async def test_a_server_restart_is_a_reset_not_a_negative_rate() -> None:
    reg, clock, target = CollectorRegistry(), FakeClock(), Target(_vllm(100, 10, 1.0))
    src = _source(target, reg, clock)
    await src.scrape_once()
    clock.advance(10)
    target.text = _vllm(20, 2, 0.5)  # restarted: everything counts from zero again
    await src.scrape_once()
    lab = {"server": "llm", "model": "m", "version": ""}
    assert _v(reg, "sidecar_serving_requests_per_second", **lab, outcome="success") == pytest.approx(2.0)
    assert _v(reg, "sidecar_serving_requests_total", **lab, outcome="success") == 20
    assert _v(reg, "sidecar_serving_gen_ai_server_time_to_first_token_seconds", **lab, stat="avg") == 0.25
    assert (_v(reg, "sidecar_server_series_resets_total", server="llm") or 0) >= 2


async def test_a_failed_scrape_withdraws_interval_slis_and_says_why() -> None:
    reg, clock, target = CollectorRegistry(), FakeClock(), Target(_vllm(100, 10, 1.0))
    src = _source(target, reg, clock)
    await src.scrape_once()
    clock.advance(10)
    await src.scrape_once()
    target.status = 500
    assert not await src.scrape_once()
    lab = {"server": "llm", "model": "m", "version": ""}
    assert _v(reg, "sidecar_serving_requests_per_second", **lab, outcome="success") is None
    assert _v(reg, "sidecar_server_scrape_failures_total", server="llm", reason="http_status") == 1
    assert _v(reg, "sidecar_server_up", server="llm") == 0
    assert not src.readiness().ok and "HTTP 500" in src.readiness().detail


async def test_interval_slis_go_stale_without_a_good_scrape() -> None:
    reg, clock, target = CollectorRegistry(), FakeClock(), Target(_vllm(100, 10, 1.0))
    src = _source(target, reg, clock, stale_after_secs=30)
    await src.scrape_once()
    clock.advance(10)
    await src.scrape_once()
    clock.advance(31)
    lab = {"server": "llm", "model": "m", "version": ""}
    assert _v(reg, "sidecar_serving_kv_cache_usage", **lab) is None


async def test_an_exposition_no_profile_matches_says_so_in_readyz(fixture_text: Callable[[str], str]) -> None:
    reg, clock = CollectorRegistry(), FakeClock()
    src = _source(Target("# TYPE python_info gauge\npython_info 1\n"), reg, clock)
    assert not await src.scrape_once()
    ready = src.readiness()
    assert not ready.ok and "matches no profile" in ready.detail
    assert _v(reg, "sidecar_server_unmatched_scrapes_total", server="llm") == 1
    pinned = _source(Target(fixture_text("triton-histograms.prom")), CollectorRegistry(), clock, profile="vllm")
    assert not await pinned.scrape_once()
    assert "profile vllm matches none" in pinned.readiness().detail


async def test_refused_families_are_counted_by_reason() -> None:
    reg, clock = CollectorRegistry(), FakeClock()
    bad = 'vllm:num_requests_running{model_name="m"} NaN\n'
    src = _source(Target(_vllm(1, 1, 1.0, extra=bad)), reg, clock)
    assert await src.scrape_once()
    assert _v(reg, "sidecar_server_families_refused_total", server="llm", reason="non_finite") == 1
    assert _v(reg, "sidecar_serving_requests_in_flight", server="llm", model="m", version="") is None


async def test_too_many_series_fails_the_scrape() -> None:
    reg, clock = CollectorRegistry(), FakeClock()
    src = _source(Target(_vllm(1, 1, 1.0)), reg, clock, max_series=3)
    assert not await src.scrape_once()
    assert _v(reg, "sidecar_server_scrape_failures_total", server="llm", reason="too_many_series") == 1


async def test_a_server_without_a_failure_count_has_no_error_ratio_rather_than_zero(
    fixture_text: Callable[[str], str],
) -> None:
    reg, clock, target = CollectorRegistry(), FakeClock(), Target(fixture_text("torchserve.prom"))
    src = _source(target, reg, clock)
    await src.scrape_once()
    clock.advance(10)
    target.text = target.text.replace("} 40.0", "} 60.0")
    await src.scrape_once()
    lab = {"server": "llm", "model": "resnet18", "version": ""}  # TorchServe's "default": no version named
    assert _v(reg, "sidecar_serving_requests_per_second", **lab, outcome="other") == pytest.approx(2.0)
    assert _v(reg, "sidecar_serving_error_ratio", **lab) is None


async def test_an_auto_source_detects_again_when_its_profile_maps_nothing(fixture_text: Callable[[str], str]) -> None:
    reg, clock, target = CollectorRegistry(), FakeClock(), Target(fixture_text("vllm-current.prom"))
    src = _source(target, reg, clock)
    assert await src.scrape_once() and src.last is not None and src.last.profile == "vllm"
    clock.advance(10)
    target.text = fixture_text("sglang.prom")  # another server now answers at that URL
    assert await src.scrape_once() and src.last.profile == "sglang"
    assert _v(reg, "sidecar_server_profile_info", server="llm", profile="sglang") == 1
    assert _v(reg, "sidecar_server_profile_info", server="llm", profile="vllm") is None
