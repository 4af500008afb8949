"""``/changes``: the change log's timeline with who, what, where from, and the alerts that cite each change,
against the real change log and alert book."""

from __future__ import annotations

from fastapi.testclient import TestClient
from pagetree import Node, parse
from prometheus_client import CollectorRegistry
from test_status_pages import NOW, Script, _f

from sidecar.app import create_app
from sidecar.clock import FakeClock
from sidecar.config import parse_config
from sidecar.model import Change
from sidecar.service import Service
from sidecar.store import Store
from sidecar.wiring.alerting import build as alerting
from sidecar.wiring.pages import build as pages


def _cells(tr: Node) -> list[str]:
    return [td.text().strip() for td in tr.find_all("td") if td.parent is tr]


def test_timeline_lists_each_change_with_source_and_the_alerts_citing_it() -> None:
    clock = FakeClock(NOW)
    script = Script()
    svc = Service(
        parse_config({"triton": {"enabled": False}, "alerting": {"enabled": True}}),
        clock=clock,
        store=Store(":memory:"),
        registry=CollectorRegistry(),
        factories=[alerting, pages, lambda ctx: [script]],
    )
    log = svc.component("changes")
    log.record(
        Change(what="ctr v2 loaded", at=NOW - 3600, who="triton", model="ctr", version="2", source="triton_repository")
    )
    log.record(
        Change(what="rank v9 rolled out", at=NOW - 1200, who="bo", model="rank", link="https://deploys.example/9")
    )
    log.record(Change(what="feature pipeline v7", at=NOW - 600, who="ana", model="ctr"))
    script.findings = [_f("ctr_mean", True)]
    svc.evaluate_once(NOW)
    doc = parse(TestClient(create_app(svc)).get("/changes").text)
    rows = doc.by_id("changes").find_all("tr", cls="change")
    got = [_cells(r) for r in rows]
    # Newest first; where each came from; the ctr alert cites the ctr changes it names, never rank's.
    assert [g[1] for g in got] == ["feature pipeline v7", "rank v9 rolled out", "ctr v2 loaded"]
    assert got[0][0].startswith("2027-01-15 07:50:00Z") and "10m ago" in got[0][0]
    assert got[0][2:5] == ["ctr", "ana", "POST /v1/changes"]
    assert got[2][2:5] == ["ctr v2", "triton", "Triton repository poll"]
    assert rows[1].find("a").attrs["href"] == "https://deploys.example/9"
    cited = [[a.text() for a in r.find("td", cls="cited").find_all("a")] for r in rows]
    assert cited == [["CtrMean · ctr v2"], [], ["CtrMean · ctr v2"]]
    assert rows[0].find("td", cls="cited").find(cls="badge").text() == "firing"  # for_secs 0: fires at once


def test_filter_by_model_and_no_changes() -> None:
    svc = Service(
        parse_config({"triton": {"enabled": False}, "alerting": {"enabled": True}}),
        clock=FakeClock(NOW),
        store=Store(":memory:"),
        registry=CollectorRegistry(),
        factories=[alerting, pages],
    )
    c = TestClient(create_app(svc))
    assert "No change recorded." in parse(c.get("/changes").text).text()
    svc.component("changes").record(Change(what="a", at=NOW, model="ctr"))
    svc.component("changes").record(Change(what="b", at=NOW, model="rank"))
    rows = parse(c.get("/changes?model=rank").text).by_id("changes").find_all("tr", cls="change")
    assert [_cells(r)[1] for r in rows] == ["b"]
    assert c.get("/changes?limit=0").status_code == 400


def test_cited_by_names_each_alert_with_model_version_and_feature_once() -> None:
    from sidecar.model import Finding
    from sidecar.pages.changes import Cited, cited_by
    from sidecar.pages.status import AlertView

    script = Script()
    svc = Service(
        parse_config({"triton": {"enabled": False}, "alerting": {"enabled": True}}),
        clock=FakeClock(NOW),
        store=Store(":memory:"),
        registry=CollectorRegistry(),
        factories=[alerting, pages, lambda ctx: [script]],
    )
    svc.component("changes").record(Change(what="fraud v2 loaded", at=NOW - 300, who="triton", model="fraud"))

    def drift(feature: str, test: str) -> Finding:
        labels = {"model": "fraud", "version": "2", "feature": feature, "test": test}
        return Finding(check="drift", kind="drift", active=True, severity="warning", labels=labels, value=0.3)

    # Two tests of one feature are two alerts in the book, one line on the page.
    script.findings = [drift("amount", "ks"), drift("amount", "psi"), drift("country", "chi2")]
    svc.evaluate_once(NOW)
    doc = parse(TestClient(create_app(svc)).get("/changes").text)
    (row,) = doc.by_id("changes").find_all("tr", cls="change")
    cited = [a.text() for a in row.find("td", cls="cited").find_all("a")]
    assert sorted(cited) == ["FeatureDrifting · fraud v2 · amount", "FeatureDrifting · fraud v2 · country"]

    def view(state: str, version: str) -> AlertView:
        labels = {"alertname": "CtrMeanDown", "model": "ctr", "version": version}
        return AlertView(state, labels, {}, NOW, None)

    # The same text twice keeps the most pressing state; a version that is not a number is named as one.
    got = cited_by([view("resolved", "all"), view("firing", "all"), view("pending", "3")])
    assert got == [Cited("CtrMeanDown · ctr · version all", "firing"), Cited("CtrMeanDown · ctr v3", "pending")]
