"""The sidecar's whole /metrics body, as Prometheus with exemplars on asks for it, read by a strict parser."""

from __future__ import annotations

from pathlib import Path

import httpx
from prometheus_client import CollectorRegistry
from prometheus_client.openmetrics.parser import text_string_to_metric_families

from sidecar.clock import FakeClock
from sidecar.config import parse_config
from sidecar.exposition import render_metrics
from sidecar.service import Service
from sidecar.store import Store

TRITON = (Path(__file__).parent / "data" / "core" / "triton-2.51-metrics.txt").read_text()


async def test_the_whole_openmetrics_exposition_passes_prometheus_clients_strict_parser() -> None:
    clock = FakeClock()
    http = httpx.AsyncClient(
        transport=httpx.MockTransport(
            lambda r: httpx.Response(200, text=TRITON, headers={"content-type": "text/plain"})
        )
    )
    svc = Service(
        parse_config({"traces": {"enabled": True}}),
        clock=clock,
        http=http,
        registry=CollectorRegistry(),
        store=Store(":memory:"),
    )
    try:
        src = svc.component("triton_metrics")
        assert await src.scrape_once()
        clock.advance(5)
        assert await src.scrape_once()
        body, ctype = render_metrics(svc.registry, "application/openmetrics-text; version=1.0.0")
        assert ctype.startswith("application/openmetrics-text")
        names = {f.name for f in text_string_to_metric_families(body.decode())}
        assert {"sidecar_model_stage_latency_seconds", "sidecar_triton_up", "sidecar_model_error_ratio"} <= names
    finally:
        svc.store.close()
        await http.aclose()
