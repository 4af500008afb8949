"""/audit as on-call reads it: model and version readable ("ctr v2", "ctr · version all", never "ctr vall"), an outcome
in every row, a finding's details (check, labels, value, threshold, p), and the trace waterfall's "audit
records of this trace" link finding the trace's per-request record."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import orjson
from fastapi.testclient import TestClient
from pagetree import Node, parse
from prometheus_client import CollectorRegistry

from sidecar.app import create_app
from sidecar.clock import FakeClock
from sidecar.config import parse_config
from sidecar.model import Change
from sidecar.service import Service
from sidecar.sources.otlp.decode import decode_json
from sidecar.store import Store
from sidecar.wiring.alerting import build as alerting
from sidecar.wiring.pages import build as pages
from sidecar.wiring.traces import build as traces

NOW = 1_800_000_000.0
TRITON = Path(__file__).resolve().parents[1] / "data" / "traces" / "otlp-traces-triton.json"


def _svc(alerting_cfg: dict[str, Any] | None = None, clock: FakeClock | None = None) -> Service:
    cfg = {
        "triton": {"enabled": False},
        "traces": {"enabled": True},
        "alerting": {"enabled": True, **(alerting_cfg or {})},
    }
    return Service(
        parse_config(cfg),
        clock=clock or FakeClock(NOW),
        store=Store(":memory:"),
        registry=CollectorRegistry(),
        factories=[alerting, traces, pages],
    )


def _rows(html: str) -> dict[str, Node]:
    return {r.attrs["data-id"]: r for r in parse(html).by_id("audit").find_all("tr", cls="audit-event")}


def _cell(row: Node, cls: str) -> str:
    return row.find("td", cls=cls).text()


def test_every_kind_has_a_readable_model_an_outcome_and_its_details() -> None:
    svc = _svc()
    audit = svc.component("audit")
    finding = {
        "check": "drift",
        "labels": {"model": "fraud", "version": "2", "feature": "amount", "test": "ks"},
        "model": "fraud",
        "version": "2",
        "value": 0.3127,
        "threshold": 0.1,
        "baseline": None,
        "p_value": 2.1e-6,
        "severity": "warning",
        "summary": "amount drifts (KS D 0.313)",
        "trace_id": None,
    }
    alert = {"labels": {"alertname": "CtrMeanDown", "model": "ctr", "version": "all", "severity": "high"}}
    for kind, ident, body in (
        ("request", "r1", {"model": "ctr", "version": "1", "outcome": "error", "code": "http_500", "latency_ms": 12.5}),
        (
            "request",
            "r2",
            {"model": "ctr", "version": "1", "outcome": "error", "latency_ms": 106.0, "client_latency_ms": 120.0},
        ),
        ("finding_crossed", "f1", finding),
        ("finding_cleared", "f2", finding),
        ("alert_fired", "a1", {**alert, "annotations": {"summary": "CTR mean down 18%"}}),
        ("alert_resolved", "a2", {**alert, "annotations": {"summary": "CTR mean down 18%"}}),
        ("alert_resent", "a3", {**alert, "annotations": {}, "window": 2, "window_secs": 3600.0}),
        ("alert_delivery_failed", "d1", {**alert, "annotations": {}, "status": 400, "attempts": 1, "reason": "bad"}),
    ):
        audit.record(kind, ident, NOW - 10, body)
    svc.component("changes").record(Change(what="ctr rollout", at=NOW - 5, who="ana", model="ctr", version="all"))
    html = TestClient(create_app(svc)).get("/audit").text
    assert "vall" not in html
    rows = _rows(html)
    assert len(rows) == 9
    for ident, row in rows.items():
        assert _cell(row, "outcome").strip(), ident  # no empty outcome, whatever the kind
    assert _cell(rows["a1"], "subject") == "ctr · version all"
    assert _cell(rows["r1"], "subject") == "ctr v1" and _cell(rows["r1"], "outcome") == "error http_500"
    change = next(r for k, r in rows.items() if k not in ("r1", "r2", "f1", "f2", "a1", "a2", "a3", "d1"))
    assert _cell(change, "subject") == "ctr · version all" and "POST /v1/changes" in _cell(change, "outcome")
    assert _cell(rows["f1"], "outcome").startswith("condition holds") and "warning" in _cell(rows["f1"], "outcome")
    assert _cell(rows["f2"], "outcome").startswith("condition cleared")
    details = _cell(rows["f1"], "details")
    for part in ("drift", "amount drifts (KS D 0.313)", "feature amount", "test ks", "value 0.3127", "threshold 0.1"):
        assert part in details, part
    assert "p 2.1e-06" in details and "baseline" not in details  # a missing number is left out
    assert _cell(rows["a1"], "outcome").startswith("fired") and "CTR mean down 18%" in _cell(rows["a1"], "details")
    assert _cell(rows["a2"], "outcome").startswith("resolved")
    # A request's latency is the caller's (its trace's duration on /traces), Triton's own beside it.
    assert _cell(rows["r1"], "details").startswith("12.5 ms")
    assert _cell(rows["r2"], "details").startswith("120.0 ms (Triton: 106.0 ms)")
    # A re-send row says when it was re-sent (the window's index alone read "window 2").
    assert _cell(rows["a3"], "outcome") == "re-sent high first re-send 2.0h-3.0h after it became active"
    assert _cell(rows["d1"], "outcome") == "not delivered HTTP 400" and "bad" in _cell(rows["d1"], "details")


def _otlp_caller(trace_id: str, status: int) -> bytes:
    """The caller's span of a trace (its HTTP status as the client saw it), as OTLP/JSON."""
    span = {
        "traceId": trace_id,
        "spanId": "ab" * 8,
        "name": "POST /predict",
        "startTimeUnixNano": str(int((NOW - 60) * 1e9)),
        "endTimeUnixNano": str(int((NOW - 60) * 1e9) + 5_000_000),
        "attributes": [{"key": "http.response.status_code", "value": {"intValue": str(status)}}],
    }
    resource = {"attributes": [{"key": "service.name", "value": {"stringValue": "ranker"}}]}
    return orjson.dumps({"resourceSpans": [{"resource": resource, "scopeSpans": [{"spans": [span]}]}]})


def test_the_waterfalls_audit_link_finds_the_traces_request_record() -> None:
    raw = TRITON.read_bytes()
    end = max(s.end_unix_nano for s in decode_json(raw).spans) / 1e9
    clock = FakeClock(end + 5)  # the recorded spans are recent, as a live Triton's are
    svc = _svc({"audit": {"requests": {"enabled": True, "sample_rate": 0.0}}}, clock)
    client = TestClient(create_app(svc))
    json = {"content-type": "application/json"}
    assert client.post("/v1/traces", content=raw, headers=json).status_code == 200
    tid = sorted({s.trace_id for s in decode_json(raw).spans})[7]
    assert client.post("/v1/traces", content=_otlp_caller(tid, 500), headers=json).status_code == 200
    page = parse(client.get(f"/traces/{tid}").text)
    href = page.by_id("audit-link").attrs["href"]
    rows = _rows(client.get(href).text)
    assert list(rows) == [f"req-{tid}"]
    (row,) = rows.values()
    assert _cell(row, "outcome") == "error http_500 (Triton: ok)"
    assert row.find("a", href=f"/traces/{tid}") is not None and "ms" in _cell(row, "details")
    # A trace whose request was not kept (ok and fast, sample rate 0) says why its page is empty.
    other = sorted({s.trace_id for s in decode_json(raw).spans})[8]
    empty = parse(client.get(f"/audit?trace_id={other}").text).by_id("none").text()
    assert "keep failed requests" in empty and "0% of the rest" in empty


def test_with_per_request_records_off_an_empty_trace_filter_says_so() -> None:
    svc = _svc({"audit": {"requests": {"enabled": False}}})  # on by default
    html = TestClient(create_app(svc)).get("/audit", params={"trace_id": "ab" * 16}).text
    assert "Per-request records are off (alerting.audit.requests.enabled)" in parse(html).by_id("none").text()
