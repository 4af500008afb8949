"""Goodput end to end: events with LLM fields posted to ``POST /v1/events`` reach the check through the wiring,
``/metrics`` carries the counters and ``/`` carries the goodput line."""

from __future__ import annotations

import html
import logging
from pathlib import Path
from typing import Any

import httpx
from fastapi.testclient import TestClient
from prometheus_client import CollectorRegistry

from sidecar.app import create_app
from sidecar.clock import FakeClock
from sidecar.component import Context
from sidecar.config import parse_config
from sidecar.pages.goodput_line import goodput_line
from sidecar.pages.readers import Api
from sidecar.pages.status import StatusPages
from sidecar.service import Service
from sidecar.store import Store
from sidecar.wiring.alerting import build as alerting
from sidecar.wiring.events import build as events
from sidecar.wiring.goodput import build as goodput
from sidecar.wiring.traces import build as traces

T0 = 1_764_892_800.0


def _page(ctx: Context) -> list[Any]:
    return [StatusPages(registry=ctx.registry, clock=ctx.clock, api=Api(ctx.registry, logging.getLogger("t")))]


def test_the_line_is_absent_without_the_check() -> None:
    assert goodput_line(CollectorRegistry()) is None


def test_posted_events_are_judged_counted_and_shown(tmp_path: Path) -> None:
    cfg = parse_config(
        {
            "alerting": {"enabled": True},
            "events": {"enabled": True},
            "checks": {"goodput": {"enabled": True, "slos": {"chat": {"ttft_ms": 500, "e2e_ms": 4000}}}},
        }
    )
    clock = FakeClock(T0)
    svc = Service(
        cfg,
        clock=clock,
        registry=CollectorRegistry(),
        store=Store(tmp_path / "s.sqlite"),
        http=httpx.AsyncClient(transport=httpx.MockTransport(lambda r: httpx.Response(200, json={}))),
        factories=[alerting, events, goodput, _page],
    )
    good = {"model": "chat", "version": "3", "fields": {"ttft_ms": 200, "latency_ms": 1500, "tokens_out": 51}}
    slow = {"model": "chat", "version": "3", "fields": {"ttft_ms": 700, "latency_ms": 1500, "tokens_out": 51}}
    with TestClient(create_app(svc, manage_lifecycle=False)) as client:
        r = client.post("/v1/events", json={"events": [good] * 75 + [slow] * 25})
        assert r.status_code == 200, r.text
        svc.evaluate_once(T0 + 30)
        metrics = client.get("/metrics").text
        page = html.unescape(client.get("/").text)
    assert 'sidecar_goodput_requests_total{good="true",model="chat",version="3"} 75.0' in metrics
    assert 'sidecar_goodput_requests_total{good="false",model="chat",version="3"} 25.0' in metrics
    # inter-token derived: (1500 - 200) / 50 = 26 ms
    assert 'sidecar_gen_ai_server_time_per_output_token_seconds_count{model="chat",version="3"} 100.0' in metrics
    line = goodput_line(svc.registry)
    assert line == "objective 99%; chat v3 burning its budget: 75% over 5m, 75% over 30m, 75% over 1h, 75% over 6h"
    assert f'id="goodput-line">goodput: {line}</p>' in page


def _otlp_llm_span(i: int, ttft_s: float) -> dict[str, Any]:
    start = int((T0 + i) * 1e9)
    attrs = {
        "gen_ai.response.model": {"stringValue": "llama"},
        "gen_ai.latency.time_to_first_token": {"doubleValue": ttft_s},
        "gen_ai.latency.e2e": {"doubleValue": 1.1},
        "gen_ai.usage.completion_tokens": {"intValue": "41"},
    }
    return {
        "traceId": f"{i + 1:032x}",
        "spanId": f"{i + 1:016x}",
        "name": "llm_request",
        "kind": 2,
        "startTimeUnixNano": str(start),
        "endTimeUnixNano": str(start + 1_100_000_000),
        "attributes": [{"key": k, "value": v} for k, v in attrs.items()],
    }


def test_llm_request_spans_posted_over_otlp_are_judged(tmp_path: Path) -> None:
    cfg = parse_config(
        {
            "traces": {"enabled": True},
            "checks": {"goodput": {"enabled": True, "slos": {"llama": {"ttft_ms": 500, "inter_token_ms": 50}}}},
        }
    )
    svc = Service(
        cfg,
        clock=FakeClock(T0),
        registry=CollectorRegistry(),
        store=Store(tmp_path / "s.sqlite"),
        http=httpx.AsyncClient(transport=httpx.MockTransport(lambda r: httpx.Response(200, json={}))),
        factories=[traces, goodput],
    )
    spans = [_otlp_llm_span(i, 0.1 if i % 4 else 0.8) for i in range(8)]  # two of eight slow to the first token
    body = {"resourceSpans": [{"resource": {"attributes": []}, "scopeSpans": [{"spans": spans}]}]}
    with TestClient(create_app(svc, manage_lifecycle=False)) as client:
        r = client.post("/v1/traces", json=body)
        assert r.status_code == 200, r.text
    get = svc.registry.get_sample_value
    assert get("sidecar_goodput_requests_total", {"model": "llama", "version": "", "good": "true"}) == 6
    assert get("sidecar_goodput_requests_total", {"model": "llama", "version": "", "good": "false"}) == 2
    # inter-token derived from the span: (1100 - 100) / 40 = 25 ms, within 50 ms
    assert get("sidecar_goodput_slo_missed_total", {"model": "llama", "version": "", "slo": "inter_token"}) is None


def test_a_model_with_only_a_servers_histograms_is_said_to_have_a_bound_not_a_figure() -> None:
    from prometheus_client import Gauge

    from sidecar.checks.goodput.check import GoodputCheck
    from sidecar.checks.goodput.config import GoodputConfig

    reg = CollectorRegistry()
    GoodputCheck(GoodputConfig(enabled=True), registry=reg)
    ttft = Gauge(
        "sidecar_serving_gen_ai_server_time_to_first_token_seconds",
        "as the servers source exports it",
        ["server", "model", "version", "stat"],
        registry=reg,
    )
    ttft.labels("vllm", "llama", "", "p95").set(0.4)
    assert goodput_line(reg) == (
        "objective 99%; no judged requests yet; llama on vllm: histograms only, so its goodput is a bound from "
        "bucket edges, not a figure (docs/servers.md, Goodput)"
    )
