"""``/audit``: the audit trail page over GET /v1/audit (filters, cursor paging, a refused parameter shown
as unavailable), with the real audit log and change log; the alert annotation links to it."""

from __future__ import annotations

from urllib.parse import parse_qs, urlsplit

from fastapi.testclient import TestClient
from prometheus_client import CollectorRegistry

from sidecar.app import create_app
from sidecar.clock import FakeClock
from sidecar.config import parse_config
from sidecar.model import Change
from sidecar.service import Service
from sidecar.store import Store
from sidecar.wiring.alerting import build as alerting
from sidecar.wiring.pages import build as pages

NOW = 1_800_000_000.0


def _svc() -> Service:
    return Service(
        parse_config({"triton": {"enabled": False}, "alerting": {"enabled": True}}),
        clock=FakeClock(NOW),
        store=Store(":memory:"),
        registry=CollectorRegistry(),
        factories=[alerting, pages],
    )


def test_page_lists_filters_and_pages_with_the_cursor() -> None:
    svc = _svc()
    audit = svc.component("audit")
    for i in range(5):
        audit.record(
            "request",
            f"r{i}",
            NOW - 100 + i,
            {
                "model": "ctr",
                "version": "1",
                "trace_id": f"{i:032x}",
                "outcome": "error" if i == 3 else "ok",
                "code": "http_500" if i == 3 else "http_200",
                "triton_outcome": "ok",
                "latency_ms": 12.5,
            },
        )
    svc.component("changes").record(Change(what="ctr v2 loaded", at=NOW - 50, who="triton", model="ctr"))
    client = TestClient(create_app(svc))
    html = client.get("/audit", params={"kind": "request", "limit": "2"}).text
    assert html.count('class="audit-event"') == 2
    assert 'data-id="r4"' in html and 'data-id="r3"' in html and "(Triton: ok)" in html
    nxt = html.split('id="next" href="')[1].split('"')[0].replace("&amp;", "&")
    q = parse_qs(urlsplit(nxt).query)
    assert q["kind"] == ["request"] and q["limit"] == ["2"] and q["cursor"]
    html2 = client.get(nxt).text
    assert 'data-id="r2"' in html2 and 'data-id="r1"' in html2 and 'data-id="r4"' not in html2
    assert "ctr v2 loaded" in client.get("/audit", params={"kind": "change"}).text
    # Any text is a model name to filter on (as events accept); a quote only matches nothing.
    assert "No audit event matches." in client.get("/audit", params={"model": "x' OR 1=1"}).text
    bad = client.get("/audit", params={"limit": "0"}).text
    assert "/v1/audit answered 400" in bad


def test_alert_annotations_link_to_the_audit_page() -> None:
    from sidecar.alerting.config import TemplatesConfig
    from sidecar.alerting.render.annotations import Annotator
    from sidecar.model import Finding

    a = Annotator(
        TemplatesConfig(),
        registry=CollectorRegistry(),
        runbook_base="http://s/runbooks",
        dashboard_base=None,
        sidecar_url="http://s:8080",
    )
    f = Finding(
        check="ctr_mean", kind="business", active=True, severity="warning", labels={}, value=0.1, trace_id="ab" * 16
    )
    assert (
        a.annotate(f, {"model": "ctr", "version": "2"}, [])["audit_url"] == f"http://s:8080/audit?trace_id={'ab' * 16}"
    )
    f2 = Finding(check="ctr_mean", kind="business", active=True, severity="warning", labels={}, value=0.1)
    assert (
        a.annotate(f2, {"model": "ctr", "version": "2"}, [])["audit_url"] == "http://s:8080/audit?model=ctr&version=2"
    )


def test_the_trace_waterfall_links_to_its_audit_records() -> None:
    from pathlib import Path

    from sidecar.sources.otlp.decode import decode_json
    from sidecar.wiring.traces import build as traces

    cfg = parse_config({"triton": {"enabled": False}, "traces": {"enabled": True}, "alerting": {"enabled": True}})
    svc = Service(
        cfg,
        clock=FakeClock(NOW),
        store=Store(":memory:"),
        registry=CollectorRegistry(),
        factories=[alerting, traces, pages],
    )
    data = Path(__file__).resolve().parents[1] / "data" / "traces" / "otlp-traces-triton.json"
    spans = list(decode_json(data.read_bytes()).spans)[:3]
    svc.component("traces").ingest(spans, "test")
    html = TestClient(create_app(svc)).get(f"/traces/{spans[0].trace_id}").text
    assert f'id="audit-link" href="/audit?trace_id={spans[0].trace_id}"' in html


def test_a_delivery_failure_row_shows_its_attempts_alertmanager_and_reason() -> None:
    svc = _svc()
    svc.component("audit").record(
        "alert_delivery_failed",
        "df-1",
        NOW - 10,
        {
            "labels": {"alertname": "WerHigh", "model": "asr"},
            "annotations": {"summary": "WER high"},
            "alertmanager": "http://am-0:9093",
            "attempts": 3,
            "status": 400,
            "reason": 'HTTP 400: "invalid label set"',
            "state": "firing",
        },
    )
    html = TestClient(create_app(svc)).get("/audit", params={"kind": "alert_delivery_failed"}).text
    assert 'data-id="df-1"' in html and "WerHigh" in html
    assert "3 attempts to http://am-0:9093" in html and "invalid label set" in html


def test_the_audit_url_of_a_unicode_model_opens_a_page_with_its_rows() -> None:
    from sidecar.alerting.config import TemplatesConfig
    from sidecar.alerting.render.annotations import Annotator
    from sidecar.model import Finding

    svc = _svc()
    svc.component("audit").record("request", "accented", NOW - 10, {"model": "modèle", "version": "2"})
    svc.component("audit").record("request", "plain", NOW - 5, {"model": "model", "version": "2"})
    a = Annotator(
        TemplatesConfig(), registry=CollectorRegistry(), runbook_base="", dashboard_base=None, sidecar_url="http://s"
    )
    f = Finding(check="ctr_mean", kind="business", active=True, severity="warning", labels={}, value=0.1)
    url = urlsplit(a.annotate(f, {"model": "modèle", "version": "2"}, [])["audit_url"])
    r = TestClient(create_app(svc)).get(f"{url.path}?{url.query}")
    assert r.status_code == 200
    assert 'data-id="accented"' in r.text and 'data-id="plain"' not in r.text
    assert "answered 400" not in r.text
