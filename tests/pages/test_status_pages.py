"""``/`` and ``/alerts`` with the real alert book, change log, Alertmanager delivery and Triton source behind
them (issue 13, "Pages"): what on-call reads must be what those components hold."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence

import httpx
from fastapi import APIRouter
from fastapi.responses import JSONResponse
from fastapi.testclient import TestClient
from pagetree import Node, parse
from prometheus_client import CollectorRegistry

from sidecar.app import create_app
from sidecar.clock import FakeClock
from sidecar.component import Readiness, Role
from sidecar.config import parse_config
from sidecar.model import Finding
from sidecar.pages.status import alert_views
from sidecar.service import Service
from sidecar.store import Store
from sidecar.wiring.alerting import build as alerting
from sidecar.wiring.pages import build as pages
from sidecar.wiring.triton import build as triton

AM = "http://alertmanager.example:9093"
TRITON = "http://triton.example:8002/metrics"
NOW = 1_800_000_000.0
TID = "0af7651916cd43dd8448eb211c80319c"


class Script:
    """A check whose findings the test sets round by round."""

    name = "script"
    role = Role.CHECK

    def __init__(self) -> None:
        self.findings: list[Finding] = []

    def evaluate(self, now: float) -> Sequence[Finding]:
        return self.findings

    async def start(self) -> None: ...

    async def shutdown(self) -> None: ...

    def readiness(self) -> None:
        return None

    def routes(self) -> None:
        return None


def _f(check: str, active: bool, *, for_secs: float = 0, trace: str | None = None, **labels: str) -> Finding:
    return Finding(
        check=check,
        kind="business",
        labels={"model": "ctr", "version": "2", **labels},
        active=active,
        value=0.01,
        threshold=0.02,
        window_secs=300,
        for_secs=for_secs,
        trace_id=trace,
        summary=f"{check} is off",
    )


class Upstreams:
    """Triton and the Alertmanager, answering what the test says."""

    def __init__(self) -> None:
        self.triton_ok = True
        self.am_status = 503
        self.posted = 0

    def __call__(self, request: httpx.Request) -> httpx.Response:
        if str(request.url) == TRITON:
            if not self.triton_ok:
                return httpx.Response(500, text="down")
            return httpx.Response(200, text='nv_inference_request_success{model="ctr",version="2"} 5\n')
        if str(request.url) == f"{AM}/api/v2/alerts":
            self.posted += 1
            return httpx.Response(self.am_status, json={})
        return httpx.Response(404)


def _service() -> tuple[Service, Script, Upstreams, FakeClock]:
    cfg = parse_config(
        {
            "triton": {"enabled": True, "metrics_url": TRITON},
            "alerting": {"enabled": True, "alertmanager": {"urls": [AM]}},
        }
    )
    up = Upstreams()
    clock = FakeClock(NOW)
    script = Script()
    svc = Service(
        cfg,
        clock=clock,
        store=Store(":memory:"),
        registry=CollectorRegistry(),
        http=httpx.AsyncClient(transport=httpx.MockTransport(up)),
        factories=[alerting, triton, pages, lambda ctx: [script]],
    )
    return svc, script, up, clock


def _get(svc: Service, path: str) -> Node:
    # No lifespan: nothing runs in the background, the test drives each component itself.
    r = TestClient(create_app(svc)).get(path)
    assert r.status_code == 200, r.text
    return parse(r.text)


def _rows(table: Node) -> list[Node]:
    return table.find_all("tr", cls="alert")


def _cells(tr: Node) -> list[Node]:
    return [c for c in tr.children if isinstance(c, Node) and c.tag == "td"]


def _setup_alerts() -> tuple[Service, Upstreams, FakeClock]:
    svc, script, up, clock = _service()
    script.findings = [_f("ctr_mean", True, trace=TID), _f("latency", True, for_secs=600), _f("fraud_rate", True)]
    svc.evaluate_once(NOW)
    clock.advance(120)
    script.findings = [_f("ctr_mean", True, trace=TID), _f("latency", True, for_secs=600), _f("fraud_rate", False)]
    svc.evaluate_once(NOW + 120)
    return svc, up, clock


def test_alerts_page_groups_firing_pending_and_resolved_with_labels_annotations_and_times() -> None:
    svc, _, _ = _setup_alerts()
    doc = _get(svc, "/alerts")
    tables = {t.attrs["data-state"]: t for t in doc.find_all("table", cls="alerts")}
    names = {s: [r.find("b").text() for r in _rows(t)] for s, t in tables.items()}
    assert names == {"firing": ["CtrMean"], "pending": ["Latency"], "resolved": ["FraudRate"]}
    firing = _rows(tables["firing"])[0]
    cells = _cells(firing)
    labels, annotations, since, links = cells[1].text(), cells[2].text(), cells[3].text(), cells[4]
    assert 'model="ctr"' in labels and 'version="2"' in labels and 'severity="warning"' in labels
    book = next(
        a for a in TestClient(create_app(svc)).get("/v1/alerts").json() if a["labels"]["alertname"] == "CtrMean"
    )
    assert cells[2].find("b").text() == book["annotations"]["summary"]  # the book's own words, whole
    assert book["annotations"]["description"] in annotations
    assert since.startswith("2027-01-15 08:00:00Z (2m ago)")
    hrefs = {a.text(): a.attrs["href"] for a in links.find_all("a")}
    assert hrefs["trace"].endswith(f"/traces/{TID}") and "runbook" in hrefs
    resolved = _cells(_rows(tables["resolved"])[0])
    assert "resolved 2027-01-15 08:02:00Z (0s ago)" in resolved[3].text()
    pending = _cells(_rows(tables["pending"])[0])
    assert pending[3].text().startswith("2027-01-15 08:00:00Z")


def _delivery(doc: Node) -> list[str]:
    table = next(t for t in doc.find_all("table") if "alertmanager" in t.find("th").text())
    return [td.text() for td in table.find_all("tr")[1].find_all("td")]


def test_alerts_page_shows_delivery_state_per_alertmanager() -> None:
    svc, up, _ = _setup_alerts()
    am = svc.component("alertmanager")
    # Two notices (CtrMean firing, FraudRate resolved) wait; none was POSTed yet.
    assert _delivery(_get(svc, "/alerts"))[:3] == [AM, "queued", "2"]
    assert asyncio.run(am.flush_once(AM))[0] == "retry"  # Alertmanager answers 503
    assert _delivery(_get(svc, "/alerts")) == [AM, "failing", "2", "0", "0", "0", "1"]
    up.am_status = 200
    assert asyncio.run(am.flush_once(AM))[0] == "sent"
    assert _delivery(_get(svc, "/alerts")) == [AM, "delivered", "0", "2", "0", "0", "1"]


def test_status_page_shows_triton_up_and_down_with_the_last_good_scrape() -> None:
    svc, _, up, clock = _service()
    src = svc.component("triton_metrics")
    card = _get(svc, "/").by_id("triton")
    assert card.find(cls="badge").text() == "down"  # never scraped
    assert "last good scrapenever" in card.text().replace("\n", "")
    assert asyncio.run(src.scrape_once())
    card = _get(svc, "/").by_id("triton")
    assert card.find(cls="badge").text() == "up"
    assert "2027-01-15 08:00:00Z (0s ago)" in card.text()
    up.triton_ok = False
    clock.advance(300)
    assert not asyncio.run(src.scrape_once())
    card = _get(svc, "/").by_id("triton")
    assert card.find(cls="badge").text() == "down"
    assert "2027-01-15 08:00:00Z (5m ago)" in card.text()  # the last good one, not the failed one


def test_status_page_counts_active_alerts_and_lists_the_last_changes() -> None:
    svc, _, _ = _setup_alerts()
    c = TestClient(create_app(svc))
    assert c.post("/v1/changes", json={"what": "feature pipeline v7", "who": "ana", "model": "ctr"}).status_code == 201
    doc = parse(c.get("/").text)
    card = doc.by_id("alerts")
    assert [b.text() for b in card.find_all(cls="badge")][:2] == ["1 firing", "1 pending"]
    listed = [tr.find("b").text() for tr in card.find("table").find_all("tr")]
    assert listed == ["CtrMean", "Latency"]  # firing first; the resolved one is not "active"
    assert "1 recently resolved" in card.text()
    change = doc.by_id("changes").find("table").find_all("tr")[0]
    assert "feature pipeline v7" in change.text() and "ana" in change.text() and "(ctr)" in change.text()
    links = {a.attrs["href"] for a in doc.by_id("links").find_all("a")}
    assert {"/alerts", "/traces", "/metrics", "/readyz", "/v1/alerts", "/v1/changes", "/docs"} <= links


def test_pages_say_not_configured_when_an_area_is_off() -> None:
    cfg = parse_config({"triton": {"enabled": False}})
    svc = Service(cfg, clock=FakeClock(NOW), store=Store(":memory:"), registry=CollectorRegistry(), factories=[pages])
    doc = _get(svc, "/")
    assert "Triton scraping is not configured." in doc.by_id("triton").text()
    assert "Not available: not configured." in doc.by_id("alerts").text()
    assert "Not available: not configured." in doc.by_id("changes").text()
    assert "No GPU visible" in doc.by_id("gpus").text()
    alerts = _get(svc, "/alerts")
    assert "Not available: not configured." in alerts.text()
    assert "No Alertmanager configured" in alerts.text()


def test_static_css_is_served_locally_and_linked_by_every_page() -> None:
    svc, _, _, _ = _service()
    c = TestClient(create_app(svc))
    for path in ("/", "/alerts"):
        links = [n.attrs["href"] for n in parse(c.get(path).text).find_all("link", rel="stylesheet")]
        assert links == ["/static/pages/pages.css"]
    r = c.get("/static/pages/pages.css")
    assert r.status_code == 200 and r.headers["content-type"].startswith("text/css") and b".badge" in r.content
    assert c.get("/static/pages/..%2Fstatus.py").status_code == 404


def test_status_page_lists_only_drifting_features_and_each_gpu_with_its_use() -> None:
    from prometheus_client import Gauge

    cfg = parse_config({"triton": {"enabled": False}})
    svc = Service(cfg, clock=FakeClock(NOW), store=Store(":memory:"), registry=CollectorRegistry(), factories=[pages])
    lab = ["model", "version", "feature", "test"]
    drifting = Gauge("sidecar_drift_drifting", "d", lab, registry=svc.registry)
    p = Gauge("sidecar_drift_p_value", "p", lab, registry=svc.registry)
    effect = Gauge("sidecar_drift_effect_size", "e", lab, registry=svc.registry)
    for feature, on in (("clicks_7d", 1), ("income", 0)):
        drifting.labels("ctr", "2", feature, "ks").set(on)
        p.labels("ctr", "2", feature, "ks").set(0.0001 if on else 0.4)
        effect.labels("ctr", "2", feature, "ks").set(0.31 if on else 0.02)
    gl = ["gpu", "uuid", "name"]
    Gauge("sidecar_gpu_up", "u", gl, registry=svc.registry).labels("0", "GPU-a", "NVIDIA H200").set(1)
    Gauge("sidecar_gpu_utilization_ratio", "u", gl, registry=svc.registry).labels("0", "GPU-a", "NVIDIA H200").set(0.42)
    Gauge("sidecar_gpu_memory_used_bytes", "m", gl, registry=svc.registry).labels("0", "GPU-a", "NVIDIA H200").set(
        8 * 2**30
    )
    Gauge("sidecar_gpu_memory_total_bytes", "m", gl, registry=svc.registry).labels("0", "GPU-a", "NVIDIA H200").set(
        141 * 2**30
    )
    doc = _get(svc, "/")
    rows = doc.by_id("drift").find("table").find_all("tr")
    assert [[td.text() for td in r.find_all("td")] for r in rows[1:]] == [
        ["ctr v2", "clicks_7d", "ks", "0.0001", "0.310"]
    ]
    assert "2 feature(s) monitored." in doc.by_id("drift").text()
    gpu = doc.by_id("gpus").find("table").find_all("tr")[1]
    assert [td.text() for td in gpu.find_all("td")] == ["0", "NVIDIA H200", "up", "42%", "8.0 / 141.0 GiB"]


class Broken:
    """Not ready, and its alerts route fails: the status page must still render, say so, and count it."""

    name = "broken"
    role = Role.SINK

    async def start(self) -> None: ...

    async def shutdown(self) -> None: ...

    def readiness(self) -> Readiness:
        return Readiness(False, "outbox unwritable")

    def routes(self) -> APIRouter:
        r = APIRouter()

        @r.get("/v1/alerts")
        async def alerts() -> JSONResponse:
            return JSONResponse({"error": "book locked"}, status_code=500)

        return r


def test_a_failing_read_is_shown_and_counted_and_not_ready_is_shown() -> None:
    svc = Service(
        parse_config({"triton": {"enabled": False}}),
        clock=FakeClock(NOW),
        store=Store(":memory:"),
        registry=CollectorRegistry(),
        factories=[pages, lambda ctx: [Broken()]],
    )
    doc = _get(svc, "/")
    assert "Not available: /v1/alerts answered 500." in doc.by_id("alerts").text()
    ready = doc.by_id("readiness")
    assert ready.find(cls="badge").text() == "not ready"
    assert [td.text() for td in ready.find("table").find_all("td")] == ["broken", "not ready: outbox unwritable"]
    assert (
        svc.registry.get_sample_value("sidecar_page_source_errors_total", {"path": "/v1/alerts", "reason": "status"})
        == 1
    )


def test_a_drift_alert_links_to_its_models_drift_page_and_no_link_is_a_script() -> None:
    (view,) = alert_views(
        [
            {
                "labels": {"alertname": "Drift", "model": "ctr & co", "feature": "x"},
                "state": "firing",
                "annotations": {"runbook_url": "javascript:alert(1)", "trace_url": "/traces/ab"},
            }
        ]
    )
    assert view.links == [("trace", "/traces/ab"), ("drift", "/drift?model=ctr+%26+co")]
