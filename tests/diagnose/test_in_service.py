"""The diagnose check inside a Service: the fake clock makes ten minutes pass without spans, the finding
reaches the alert book with its what-to-do text, /readyz shows it, and a span clears it."""

from __future__ import annotations

import asyncio
from pathlib import Path

import httpx
from fastapi.testclient import TestClient
from prometheus_client import CollectorRegistry

from sidecar.app import create_app
from sidecar.clock import FakeClock
from sidecar.config import parse_config
from sidecar.model import Batch
from sidecar.service import Service
from sidecar.store import Store
from sidecar.wiring.alerting import build as alerting_build
from sidecar.wiring.diagnose import build as diagnose_build
from tests.diagnose.recorded import exposition


class _Triton:
    """Answers /metrics with the recorded exposition, one more request served per call."""

    def __init__(self) -> None:
        self.served = 1000

    def __call__(self, request: httpx.Request) -> httpx.Response:
        if request.url.path == "/metrics":
            self.served += 100
            return httpx.Response(
                200,
                text=exposition(success=self.served, queue_us=0, compute_us=0),
                headers={"content-type": "text/plain; version=0.0.4"},
            )
        return httpx.Response(404, json={"error": "not found"})


def _service(tmp_path: Path, clock: FakeClock, registry: CollectorRegistry) -> Service:
    cfg = parse_config(
        {
            "alerting": {"enabled": True, "default_for_secs": 0},
            "triton": {"http_url": None},
            "traces": {"enabled": True},
        }
    )
    http = httpx.AsyncClient(transport=httpx.MockTransport(_Triton()))
    return Service(
        cfg,
        clock=clock,
        registry=registry,
        store=Store(tmp_path / "s.sqlite"),
        http=http,
        factories=[alerting_build, diagnose_build],
    )


def test_no_spans_for_ten_minutes_is_a_diagnosis_until_a_span_arrives(tmp_path: Path, clock: FakeClock) -> None:
    registry = CollectorRegistry()
    svc = _service(tmp_path, clock, registry)
    diag = svc.component("diagnose")
    asyncio.run(diag.probe_once())
    clock.advance(599)
    asyncio.run(diag.probe_once())
    assert [f for f in svc.evaluate_once(clock.now()) if f.active] == []
    clock.advance(1)
    asyncio.run(diag.probe_once())
    active = [f for f in svc.evaluate_once(clock.now()) if f.active]
    assert [(f.kind, f.labels["diagnosis"]) for f in active] == [("diagnosis", "no_spans")]
    assert (
        registry.get_sample_value("sidecar_diagnosis_active", {"diagnosis": "no_spans", "model": "", "version": ""})
        == 1
    )
    alerts = svc.component("alert_book").alerts.values()
    (alert,) = [a for a in alerts if a.labels.get("diagnosis") == "no_spans"]
    assert "no spans received in 10 minutes: check --trace-config" in alert.annotations["summary"]
    assert "What to do: start Triton with --trace-config" in alert.annotations["description"]
    assert alert.labels["alertname"] == "Diagnosis"
    assert alert.annotations["runbook_url"].endswith("/runbooks/Diagnosis.md")
    with TestClient(create_app(svc, manage_lifecycle=False)) as client:
        ready = client.get("/readyz").json()["components"]["diagnose"]
    assert "no_spans: no spans received in 10 minutes: check --trace-config" in ready

    svc.bus.publish(Batch(kind="spans", source="otlp", items=(("span",),)))
    found = svc.evaluate_once(clock.now())
    assert not any(f.active for f in found)
    assert (
        registry.get_sample_value("sidecar_diagnosis_active", {"diagnosis": "no_spans", "model": "", "version": ""})
        == 0
    )
    assert svc.component("diagnose").readiness().detail == "no problems found"


def test_status_page_shows_the_diagnosis_line(tmp_path: Path, clock: FakeClock) -> None:
    from sidecar.wiring.pages import build as pages_build

    cfg = parse_config({"triton": {"http_url": None}, "traces": {"enabled": True}})
    http = httpx.AsyncClient(transport=httpx.MockTransport(_Triton()))
    svc = Service(
        cfg,
        clock=clock,
        registry=CollectorRegistry(),
        store=Store(tmp_path / "s.sqlite"),
        http=http,
        factories=[diagnose_build, pages_build],
    )
    diag = svc.component("diagnose")
    asyncio.run(diag.probe_once())
    clock.advance(600)
    asyncio.run(diag.probe_once())
    svc.evaluate_once(clock.now())
    with TestClient(create_app(svc, manage_lifecycle=False)) as client:
        page = client.get("/").text
    assert 'id="diagnoses"' in page
    assert "no spans received in 10 minutes: check --trace-config" in page
