from __future__ import annotations

import shutil
import subprocess
from collections.abc import AsyncIterator, Callable
from pathlib import Path

import httpx
import pytest
from prometheus_client import CollectorRegistry, disable_created_metrics, generate_latest

from sidecar.clock import FakeClock
from sidecar.component import Bus
from sidecar.sources.triton_config import TritonConfig
from sidecar.sources.triton_metrics import TritonMetricsSource
from sidecar.wiring.triton import triton_pair

FIXTURE = (Path(__file__).parent.parent / "data" / "core" / "triton-2.51-metrics.txt").read_text()


def bump(text: str, by: int) -> str:
    """The same scrape with every fraud success counter moved on by ``by``."""
    return text.replace(
        'nv_inference_request_success{model="fraud",version="1"} 79',
        f'nv_inference_request_success{{model="fraud",version="1"}} {79 + by}',
    )


def make(
    handler: Callable[[httpx.Request], httpx.Response], registry: CollectorRegistry, clock: FakeClock, **cfg: object
) -> tuple[TritonMetricsSource, httpx.AsyncClient]:
    http = httpx.AsyncClient(transport=httpx.MockTransport(handler))
    _, src = triton_pair(
        TritonConfig(metrics_url="http://triton:8002/metrics", **cfg),  # type: ignore[arg-type]
        registry=registry,
        clock=clock,
        http=http,
        bus=Bus(registry),
    )
    return src, http


def value(registry: CollectorRegistry, name: str, **labels: str) -> float | None:
    return registry.get_sample_value(name, labels)


FRAUD = {"model": "fraud", "version": "1"}


async def test_good_scrapes_give_rates_and_self_health(registry: CollectorRegistry, clock: FakeClock) -> None:
    bodies = [FIXTURE, bump(FIXTURE, 50)]
    src, http = make(
        lambda r: httpx.Response(200, text=bodies.pop(0), headers={"content-type": "text/plain"}), registry, clock
    )
    assert await src.scrape_once()
    clock.advance(5)
    assert await src.scrape_once()
    assert value(registry, "sidecar_triton_up") == 1
    assert value(registry, "sidecar_triton_series") == 134
    assert value(registry, "sidecar_model_successes_per_second", **FRAUD) == 10.0
    assert value(registry, "sidecar_triton_scrapes_total", result="success") == 2
    assert src.readiness().ok
    await http.aclose()


@pytest.mark.parametrize(
    "response, reason",
    [
        (lambda r: httpx.Response(500, text="oops"), "http_status"),
        (
            lambda r: httpx.Response(200, text="<html>login</html>", headers={"content-type": "text/html"}),
            "content_type",
        ),
        (lambda r: httpx.Response(200, text=FIXTURE[:4000], headers={"content-type": "text/plain"}), "parse"),
        (lambda r: httpx.Response(200, text="<html>\n", headers={"content-type": "text/plain"}), "parse"),
    ],
)
async def test_bad_answers_fail_the_scrape_and_withdraw_fresh_values(
    registry: CollectorRegistry, clock: FakeClock, response: Callable[[httpx.Request], httpx.Response], reason: str
) -> None:
    answers: list[Callable[[httpx.Request], httpx.Response]] = [
        lambda r: httpx.Response(200, text=FIXTURE),
        lambda r: httpx.Response(200, text=bump(FIXTURE, 5)),
        response,
    ]
    src, http = make(lambda r: answers.pop(0)(r), registry, clock)
    await src.scrape_once()
    clock.advance(5)
    await src.scrape_once()
    assert value(registry, "sidecar_model_successes_per_second", **FRAUD) == 1.0
    clock.advance(5)
    assert not await src.scrape_once()
    assert value(registry, "sidecar_triton_up") == 0
    assert value(registry, "sidecar_triton_scrape_failures_total", reason=reason) == 1
    # The last good interval is no longer reported as fresh.
    assert value(registry, "sidecar_model_successes_per_second", **FRAUD) is None
    assert value(registry, "sidecar_model_pending_requests", **FRAUD) is None
    assert not src.readiness().ok
    await http.aclose()


async def test_timeout_and_vanished_target_are_counted(registry: CollectorRegistry, clock: FakeClock) -> None:
    def timeout(r: httpx.Request) -> httpx.Response:
        raise httpx.ReadTimeout("slow", request=r)

    def refused(r: httpx.Request) -> httpx.Response:
        raise httpx.ConnectError("connection refused", request=r)

    answers = [timeout, refused, lambda r: httpx.Response(200, text=FIXTURE)]
    src, http = make(lambda r: answers.pop(0)(r), registry, clock)
    assert not await src.scrape_once()
    assert not await src.scrape_once()
    assert value(registry, "sidecar_triton_scrape_failures_total", reason="timeout") == 1
    assert value(registry, "sidecar_triton_scrape_failures_total", reason="connect") == 1
    assert await src.scrape_once()
    assert value(registry, "sidecar_triton_up") == 1
    await http.aclose()


async def test_too_many_series_are_refused_and_counted(registry: CollectorRegistry, clock: FakeClock) -> None:
    src, http = make(lambda r: httpx.Response(200, text=FIXTURE), registry, clock, max_series=100)
    assert await src.scrape_once()
    assert value(registry, "sidecar_triton_series") == 100
    assert value(registry, "sidecar_triton_series_refused_total") == 34
    await http.aclose()


@pytest.mark.prometheus
async def test_exposition_passes_promtool_check_metrics(registry: CollectorRegistry, clock: FakeClock) -> None:
    promtool = shutil.which("promtool")
    if promtool is None:
        pytest.fail("promtool is not installed (apt-get install prometheus)")
    bodies = [FIXTURE, bump(FIXTURE, 50)]
    src, http = make(lambda r: httpx.Response(200, text=bodies.pop(0)), registry, clock)
    await src.scrape_once()
    clock.advance(5)
    await src.scrape_once()
    disable_created_metrics()
    text = generate_latest(registry)
    proc = subprocess.run([promtool, "check", "metrics"], input=text, capture_output=True, timeout=30)
    assert proc.returncode == 0, proc.stderr.decode() + proc.stdout.decode()
    await http.aclose()


async def test_values_older_than_stale_after_are_withdrawn(registry: CollectorRegistry, clock: FakeClock) -> None:
    bodies = [FIXTURE, bump(FIXTURE, 10)]
    src, http = make(lambda r: httpx.Response(200, text=bodies.pop(0)), registry, clock, stale_after_secs=30)
    await src.scrape_once()
    clock.advance(5)
    await src.scrape_once()
    clock.advance(29)
    assert value(registry, "sidecar_model_successes_per_second", **FRAUD) == 2.0
    clock.advance(2)  # no scrape for 31 s: the loop is stuck somewhere
    assert value(registry, "sidecar_model_successes_per_second", **FRAUD) is None
    assert value(registry, "sidecar_model_request_success_total", **FRAUD) == 89
    await http.aclose()


async def test_a_runaway_body_is_cut_off_at_the_limit(registry: CollectorRegistry, clock: FakeClock) -> None:
    async def endless() -> AsyncIterator[bytes]:
        while True:
            yield b'nv_inference_count{model="m",version="1"} 1\n' * 1000

    http = httpx.AsyncClient(transport=httpx.MockTransport(lambda r: httpx.Response(200, content=endless())))
    src = TritonMetricsSource(
        TritonConfig(metrics_url="http://triton:8002/metrics"),
        registry=registry,
        clock=clock,
        http=http,
        bus=Bus(registry),
        max_body_bytes=1_000_000,
    )
    assert not await src.scrape_once()
    assert value(registry, "sidecar_triton_scrape_failures_total", reason="too_large") == 1
    await http.aclose()


async def test_openmetrics_exposition_passes_prometheus_clients_strict_parser(
    registry: CollectorRegistry, clock: FakeClock
) -> None:
    from prometheus_client.openmetrics.parser import text_string_to_metric_families

    from sidecar.exposition import render_metrics

    bodies = [FIXTURE, bump(FIXTURE, 50)]
    src, http = make(
        lambda r: httpx.Response(200, text=bodies.pop(0), headers={"content-type": "text/plain"}), registry, clock
    )
    assert await src.scrape_once()
    clock.advance(5)
    assert await src.scrape_once()
    body, ctype = render_metrics(registry, "application/openmetrics-text; version=1.0.0")
    assert ctype.startswith("application/openmetrics-text")
    fams = {f.name: f for f in text_string_to_metric_families(body.decode())}
    quant = fams["sidecar_model_stage_latency_seconds"]
    fraud_request = [s for s in quant.samples if s.labels.get("model") == "fraud" and s.labels["stage"] == "request"]
    assert [s.name for s in fraud_request] == ["sidecar_model_stage_latency_seconds"] * 4 + [
        "sidecar_model_stage_latency_seconds_count",
        "sidecar_model_stage_latency_seconds_sum",
    ]
    assert fraud_request[-2].value == 79  # Triton's summary count, untouched by the bump of the success counter
    assert fams["sidecar_model_successes_per_second"].samples
    await http.aclose()


LOADED = (Path(__file__).parent.parent / "data" / "core" / "triton-2.51-metrics-ctr-loaded.txt").read_text()
# Recorded from Triton 2.51 right after `POST /v2/repository/models/ctr/unload` in explicit mode: only ctr's
# eight zero-valued failure series are left of it.
UNLOADED = (Path(__file__).parent.parent / "data" / "core" / "triton-2.51-metrics-ctr-unloaded.txt").read_text()


async def test_recorded_unload_and_reload_of_a_model(registry: CollectorRegistry, clock: FakeClock) -> None:
    assert 'nv_inference_request_failure{model="ctr",reason="BACKEND",version="2"} 0' in UNLOADED
    bodies = [LOADED, UNLOADED, LOADED]  # loaded, 3 requests per version; unloaded; reloaded, 3 requests again
    src, http = make(
        lambda r: httpx.Response(200, text=bodies.pop(0), headers={"content-type": "text/plain"}), registry, clock
    )
    v2 = {"model": "ctr", "version": "2"}
    assert await src.scrape_once()
    assert value(registry, "sidecar_triton_models") == 3
    assert value(registry, "sidecar_model_request_success_total", **v2) == 3
    clock.advance(5)
    assert await src.scrape_once()
    assert value(registry, "sidecar_triton_models") == 1
    assert {s.name for fam in registry.collect() for s in fam.samples if s.labels.get("model") == "ctr"} == set()
    clock.advance(5)
    assert await src.scrape_once()
    assert value(registry, "sidecar_triton_models") == 3
    assert value(registry, "sidecar_model_successes_per_second", **v2) == pytest.approx(3 / 5)
    assert value(registry, "sidecar_model_request_success_total", **v2) == 6
    assert value(registry, "sidecar_triton_model_resets_total", **v2) == 1
    assert value(registry, "sidecar_model_error_ratio", **v2) == 0.0
    await http.aclose()
