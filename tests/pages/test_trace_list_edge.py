"""The trace list marks the traces an edge hop joined (by trace id or by a request id a span carries), the same
join the waterfall's edge row uses, and links the mark to the hop's panel; a trace no edge line names has none,
and with the edge off the list has no edge column."""

from __future__ import annotations

import re
from pathlib import Path

from fastapi.testclient import TestClient
from prometheus_client import CollectorRegistry
from test_trace_edge_hop import JSON, NOW, REQ, TID, TID_NONE, TID_REQ, _edge, _otlp

from sidecar.app import create_app
from sidecar.clock import FakeClock
from sidecar.config import parse_config
from sidecar.service import Service
from sidecar.store import Store
from sidecar.wiring.edge import factories


def _rows(html: str) -> dict[str, str]:
    return {m.group(1): m.group(2) for m in re.finditer(r'<tr data-trace-id="([0-9a-f]{32})">(.*?)</tr>', html, re.S)}


def _service(tmp_path: Path, edge: bool) -> Service:
    cfg = parse_config({"traces": {"enabled": True}, "edge": {"enabled": edge}})
    return Service(
        cfg,
        clock=FakeClock(NOW),
        registry=CollectorRegistry(),
        store=Store(tmp_path / "s.sqlite"),
        factories=list(factories()),
    )


def _post(c: TestClient) -> None:
    t = NOW - 10
    for tid, attrs in ((TID, None), (TID_REQ, {"http.request.header.x-request-id": REQ}), (TID_NONE, None)):
        assert c.post("/v1/traces", content=_otlp(tid, t + 0.020, t + 0.060, attrs), headers=JSON).status_code == 200


def test_traces_with_an_edge_hop_are_marked_in_the_list(tmp_path: Path) -> None:
    with TestClient(create_app(_service(tmp_path, edge=True))) as c:
        _post(c)
        t = NOW - 10
        lines = [
            _edge(time=t + 0.07, cache="MISS", request_time=0.08, upstream_time="0.050", trace_id=TID),
            _edge(time=t + 0.07, cache="HIT", request_time=0.07, upstream_time="-", request_id=REQ, node="edge-ams-2"),
        ]
        assert c.post("/v1/edge", json={"lines": lines}).json()["accepted"] == 2
        html = c.get("/traces?all=1").text
    assert "<th>edge hop</th>" in html
    rows = _rows(html)
    assert set(rows) == {TID, TID_REQ, TID_NONE}
    by_trace = re.search(r'<a class="edge-mark" href="/traces/(\w+)#edge-hop" title="([^"]*)">([^<]*)</a>', rows[TID])
    assert by_trace and by_trace.group(1) == TID and by_trace.group(3) == "edge-fra-1 \u00b7 MISS"
    assert "joined by trace id" in by_trace.group(2) and "origin 50.0 ms" in by_trace.group(2)
    by_request = re.search(r'<a class="edge-mark"[^>]* title="([^"]*)">([^<]*)</a>', rows[TID_REQ])
    assert by_request and by_request.group(2) == "edge-ams-2 \u00b7 HIT"
    assert "joined by request id" in by_request.group(1) and "origin" not in by_request.group(1)
    assert "edge-mark" not in rows[TID_NONE] and '<td class="edge-hop"></td>' in rows[TID_NONE]


def test_without_the_edge_the_list_has_no_edge_column(tmp_path: Path) -> None:
    with TestClient(create_app(_service(tmp_path, edge=False))) as c:
        _post(c)
        html = c.get("/traces?all=1").text
    assert len(_rows(html)) == 3
    assert "edge hop" not in html and "edge-mark" not in html
