"""The edge in front of the model on the trace page: an OTLP span and an edge log line of the same request,
both posted to a sidecar built by wiring, join by W3C trace id (a ``traceparent`` value) or, for another trace,
by a 20-character non-hex request id the span carries; the waterfall draws the edge hop first, on the spans'
time axis."""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import orjson
import pytest
from fastapi.testclient import TestClient
from prometheus_client import CollectorRegistry

from sidecar.clock import FakeClock
from sidecar.config import parse_config
from sidecar.service import Service
from sidecar.store import Store

NOW = 1_765_000_000.0
TID = "4bf92f3577b34da6a3ce929d0e0e4736"
TID_REQ = "5cf92f3577b34da6a3ce929d0e0e4737"
TID_NONE = "6df92f3577b34da6a3ce929d0e0e4738"
REQ = "abcdefghij-KLMNOP_qr"  # 20 characters, not hex: an opaque request id
JSON = {"content-type": "application/json"}


def _otlp(tid: str, start_s: float, end_s: float, attrs: dict[str, str] | None = None) -> bytes:
    span: dict[str, Any] = {
        "traceId": tid,
        "spanId": "a000000000000001",
        "name": "InferRequest",
        "kind": 2,
        "startTimeUnixNano": str(int(start_s * 1e9)),
        "endTimeUnixNano": str(int(end_s * 1e9)),
        "attributes": [{"key": k, "value": {"stringValue": v}} for k, v in (attrs or {}).items()],
    }
    return orjson.dumps({"resourceSpans": [{"scopeSpans": [{"spans": [span]}]}]})


def _edge(**kw: Any) -> dict[str, Any]:
    doc: dict[str, Any] = {"path": "/v2/models/ctr/infer", "status": 200, "node": "edge-fra-1"}
    doc.update(kw)
    return doc


@pytest.fixture
def client(tmp_path: Path) -> Iterator[TestClient]:
    from sidecar.app import create_app
    from sidecar.wiring.edge import factories

    cfg = parse_config({"server": {"push_token": "t0k"}, "traces": {"enabled": True}, "edge": {"enabled": True}})
    svc = Service(
        cfg,
        clock=FakeClock(NOW),
        registry=CollectorRegistry(),
        store=Store(tmp_path / "s.sqlite"),
        factories=list(factories()),
    )
    with TestClient(create_app(svc), headers={"authorization": "Bearer t0k"}) as c:
        yield c


def _attr(html: str, el_id: str, name: str) -> float:
    tag = re.search(rf'<rect[^>]*id="{el_id}"[^>]*>', html)
    assert tag, f"no #{el_id}"
    m = re.search(rf'{name}="([-0-9.]+)"', tag.group(0))
    assert m, f"#{el_id} has no {name}"
    return float(m.group(1))


def _span_bar(html: str, name: str) -> float:
    tag = re.search(r'<rect class="bar" data-span-id[^>]*>', html)
    assert tag
    m = re.search(rf'{name}="([-0-9.]+)"', tag.group(0))
    assert m
    return float(m.group(1))


def test_the_edge_hop_joins_by_trace_id_and_comes_first_on_the_same_axis(client: TestClient) -> None:
    # The model's span: 20 ms to 60 ms after NOW-10; the edge answered at NOW-10 + 70 ms after 80 ms,
    # 50 ms of it at the origin.
    t = NOW - 10
    assert client.post("/v1/traces", content=_otlp(TID, t + 0.020, t + 0.060), headers=JSON).status_code == 200
    line = _edge(
        time=t + 0.070,
        cache="MISS",
        request_time=0.080,
        upstream_time="0.050",
        trace_id=f"00-{TID.upper()}-00f067aa0ba902b7-01",
        request_id="0af7651916cd43dd",
    )
    r = client.post("/v1/edge", json={"lines": [line]})
    assert r.status_code == 200 and r.json()["accepted"] == 1, r.text
    html = client.get(f"/traces/{TID}").text
    assert "edge edge-fra-1" in html and "MISS" in html
    assert html.index('id="edge-bar"') < html.index('data-span-id="a000000000000001"')  # the edge row first
    assert 'id="edge-hop"' in html and "joined by" in html and "trace id" in html
    # One axis from the edge's start (-10 ms) to its end (70 ms): the edge starts at 0, the span at +30 ms
    # (within a microsecond: the edge's time is float seconds); the origin part (50 ms) ends where the edge ends.
    assert _attr(html, "edge-bar", "data-start-ns") == 0
    assert _attr(html, "edge-bar", "data-duration-ns") == pytest.approx(80e6, abs=1e3)
    assert _span_bar(html, "data-start-ns") == pytest.approx(30e6, abs=1e3)
    ex, ew = _attr(html, "edge-bar", "x"), _attr(html, "edge-bar", "width")
    sx, sw = _span_bar(html, "x"), _span_bar(html, "width")
    assert ex < sx and sx + sw < ex + ew  # the model's span inside the edge's bar
    assert sw / ew == pytest.approx(40 / 80, abs=0.01)
    ox, ow = _attr(html, "origin-bar", "x"), _attr(html, "origin-bar", "width")
    assert ow / ew == pytest.approx(50 / 80, abs=0.01) and ox + ow == pytest.approx(ex + ew, abs=0.02)


def test_a_non_hex_request_id_joins_when_the_span_carries_it(client: TestClient) -> None:
    t = NOW - 10
    body = _otlp(TID_REQ, t + 0.001, t + 0.004, {"http.request.header.x-request-id": REQ})
    assert client.post("/v1/traces", content=body, headers=JSON).status_code == 200
    assert client.post("/v1/traces", content=_otlp(TID_NONE, t, t + 0.004), headers=JSON).status_code == 200
    line = _edge(time=t + 0.005, cache="HIT", request_time=0.006, upstream_time="-", request_id=REQ)
    assert client.post("/v1/edge", json={"lines": [line]}).json()["accepted"] == 1
    html = client.get(f"/traces/{TID_REQ}").text
    assert 'id="edge-bar"' in html and "HIT" in html and REQ in html
    assert "request id" in html and 'id="origin-bar"' not in html  # a hit never went to the origin
    assert "none (not sent to the origin)" in html
    # A trace no edge line names has no edge row.
    other = client.get(f"/traces/{TID_NONE}").text
    assert 'id="edge-bar"' not in other and 'id="edge-hop"' not in other


def test_an_origin_time_over_the_edge_time_stays_inside_the_edge_bar() -> None:
    from sidecar.model import Span
    from sidecar.pages.waterfall import layout
    from sidecar.processors.edge_record import EdgeRecord

    span = Span(TID, "a000000000000001", None, "InferRequest", 1_000_000_000_000_000_000, 1_000_000_000_001_000_000)
    # nginx rounds both to whole milliseconds from different clock readings: origin 3 ms of a 2 ms request.
    hop = EdgeRecord(1_000_000_000.0015, "/infer", "", 0.002, 0.003, 200, "n", TID)
    bar = layout([span], hop).edge
    assert bar is not None and bar.origin is not None
    assert bar.origin[1] == pytest.approx(bar.w) and bar.origin[0] == pytest.approx(bar.x)
