"""Token-length drift end to end: a vLLM exposition (its token histograms declared as vLLM declares them) scraped
through the servers source and events posted to ``POST /v1/events`` reach the check through the wiring;
``/metrics`` carries its series and ``/`` its line."""

from __future__ import annotations

import asyncio
import html
import logging
import math
from pathlib import Path
from typing import Any

import httpx
import numpy as np
from fastapi.testclient import TestClient
from prometheus_client import CollectorRegistry, Gauge, Histogram, generate_latest

from sidecar.app import create_app
from sidecar.clock import FakeClock
from sidecar.component import Context
from sidecar.config import parse_config
from sidecar.pages.readers import Api
from sidecar.pages.status import StatusPages
from sidecar.pages.tokens_line import tokens_line
from sidecar.service import Service
from sidecar.sources.servers.source import ServerSource
from sidecar.wiring.alerting import build as alerting
from sidecar.wiring.events import build as events
from sidecar.wiring.tokens import factories

T0 = 1_764_892_800.0
W = 60.0


class Vllm:
    """vLLM's token histograms as vllm-project/vllm vllm/v1/metrics/loggers.py (commit a6f0308cfe806b7731ad4979c9
    bea6e470c35efd) declares them: ``vllm:request_prompt_tokens`` and ``vllm:request_generation_tokens``,
    buckets ``build_1_2_5_buckets(max_model_len)``, labels model_name and engine, observed once per finished
    request; written with prometheus_client, as vLLM writes them."""

    def __init__(self) -> None:
        self.reg = CollectorRegistry()
        buckets = [1, 2, 5, 10, 20, 50, 100, 200, 500, 1000, 2000]  # build_1_2_5_buckets(4096)
        lab = ["model_name", "engine"]
        self.prompt = Histogram(
            "vllm:request_prompt_tokens", "Number of prefill tokens processed.", lab, buckets=buckets, registry=self.reg
        ).labels("llama", "0")
        self.gen = Histogram(
            "vllm:request_generation_tokens",
            "Number of generation tokens processed.",
            lab,
            buckets=buckets,
            registry=self.reg,
        ).labels("llama", "0")
        Gauge("vllm:num_requests_running", "Number of requests in model execution batches.", lab, registry=self.reg)
        self.rng = np.random.default_rng(4)

    def serve(self, n: int, scale: float = 1.0) -> None:
        for x in np.round(self.rng.lognormal(math.log(300), 0.6, n) * scale):
            self.prompt.observe(float(x))
            self.gen.observe(120.0)

    def handler(self, request: httpx.Request) -> httpx.Response:
        return httpx.Response(200, content=generate_latest(self.reg), headers={"content-type": "text/plain"})


def _page(ctx: Context) -> list[Any]:
    return [StatusPages(registry=ctx.registry, clock=ctx.clock, api=Api(ctx.registry, logging.getLogger("t")))]


def test_the_line_is_absent_without_the_check() -> None:
    assert tokens_line(CollectorRegistry()) is None


def test_a_vllm_prompt_shift_is_found_from_its_histograms_and_shown(tmp_path: Path) -> None:
    vllm = Vllm()
    cfg = parse_config(
        {
            "store": {"path": str(tmp_path / "s.sqlite")},
            "alerting": {"enabled": True},
            "events": {"enabled": True},
            "servers": [{"name": "vllm", "url": "http://vllm:8000/metrics", "profile": "vllm"}],
            "checks": {
                "tokens": {
                    "enabled": True,
                    "window_secs": W,
                    "min_requests": 100,
                    "reference": {"pinned_requests": 400},
                }
            },
        }
    )
    servers, tokens = factories()
    svc = Service(
        cfg,
        clock=FakeClock(T0),
        registry=CollectorRegistry(),
        http=httpx.AsyncClient(transport=httpx.MockTransport(vllm.handler)),
        factories=[alerting, events, servers, tokens, _page],
    )
    (src,) = [c for c in svc.components if isinstance(c, ServerSource)]

    def window(w: int, scale: float) -> None:
        vllm.serve(300, scale)
        asyncio.run(src.scrape_once())
        svc.evaluate_once(T0 + (w + 1) * W + 1)

    with TestClient(create_app(svc, manage_lifecycle=False)) as client:
        for w in range(4):
            window(w, 1.0)
        assert "llama all versions prompt lengths on vllm PSI" in (tokens_line(svc.registry) or "")
        for w in range(4, 7):
            window(w, 1.3)
        # A stream of a server without histograms: its clients post the token counts.
        posted = [{"model": "stream", "version": "1", "fields": {"tokens_in": 80, "tokens_out": 12}}] * 50
        assert client.post("/v1/events", json={"events": posted}).status_code == 200
        found = svc.evaluate_once(T0 + 7 * W + 30)
        metrics = client.get("/metrics").text
        page = html.unescape(client.get("/").text)
    (f,) = [f for f in found if f.labels == {"model": "llama", "version": "", "server": "vllm", "tokens": "input"}]
    assert f.active and f.summary.startswith("llama all versions prompt lengths drift on vllm: mean ")
    key = 'model="llama",server="vllm",tokens="input",version=""'
    assert f"sidecar_token_drift_drifting{{{key}}} 1.0" in metrics
    # The server's own SLI of it, in tokens (not seconds); its interval figures need two scrapes in time.
    assert "# TYPE sidecar_serving_request_input_tokens gauge" in metrics
    line = tokens_line(svc.registry)
    assert line is not None and line.startswith("llama all versions prompt lengths on vllm drifting (PSI ")
    assert "stream v1 prompt lengths from events: no window tested yet" in line
    assert f'id="tokens-line">token lengths: {line}</p>' in page
    pinned = {"server": "events", "model": "stream", "version": "1", "tokens": "input", "part": "reference"}
    assert svc.registry.get_sample_value("sidecar_token_drift_requests_total", pinned) == 50
