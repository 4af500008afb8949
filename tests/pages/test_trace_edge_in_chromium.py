"""The edge hop on the trace page as headless Chromium lays it out at 1400 px and at a phone's 390 px: the page
is no wider than the window (the waterfall scrolls inside its box), the edge row is drawn above the model's
span with the span's bar inside the edge's bar, and the edge's panel lists node, cache status and latencies.
On the trace list the joined trace carries a visible mark that leads to that panel, the other trace none."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from app_server import AppServer
from chromium import chromium
from fastapi.testclient import TestClient
from prometheus_client import CollectorRegistry
from test_trace_edge_hop import JSON, NOW, TID, TID_NONE, _edge, _otlp

from sidecar.app import create_app
from sidecar.clock import FakeClock
from sidecar.config import parse_config
from sidecar.service import Service
from sidecar.store import Store
from sidecar.wiring.edge import factories

OVER = "document.documentElement.scrollWidth - document.documentElement.clientWidth"
BOX = "e => { const b = e.getBoundingClientRect(); return {x: b.x, y: b.y, w: b.width, h: b.height}; }"


@pytest.fixture(scope="module")
def url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    tmp: Path = tmp_path_factory.mktemp("edge_chromium")
    cfg = parse_config({"traces": {"enabled": True}, "edge": {"enabled": True}})
    svc = Service(
        cfg,
        clock=FakeClock(NOW),
        registry=CollectorRegistry(),
        store=Store(tmp / "s.sqlite"),
        factories=list(factories()),
    )
    app = create_app(svc)
    with AppServer(app) as base:
        with TestClient(app) as c:  # the same service, posted to in-process
            t = NOW - 10
            assert c.post("/v1/traces", content=_otlp(TID, t + 0.020, t + 0.060), headers=JSON).status_code == 200
            assert c.post("/v1/traces", content=_otlp(TID_NONE, t, t + 0.030), headers=JSON).status_code == 200
            line = _edge(time=t + 0.070, cache="MISS", request_time=0.080, upstream_time="0.050", trace_id=TID)
            assert c.post("/v1/edge", json={"lines": [line]}).json()["accepted"] == 1
        yield base


@pytest.mark.chromium
@pytest.mark.parametrize("width", [1400, 390])
def test_the_edge_row_is_drawn_first_and_the_page_fits(url: str, width: int, tmp_path: Path) -> None:
    with chromium() as browser:
        page = browser.new_page(viewport={"width": width, "height": 900})
        page.goto(f"{url}/traces/{TID}", wait_until="load")
        over = page.evaluate(OVER)
        edge = page.eval_on_selector("#edge-bar", BOX)
        origin = page.eval_on_selector("#origin-bar", BOX)
        span = page.eval_on_selector("rect.bar[data-span-id]", BOX)
        label = page.text_content("#edge-label")
        page.click("#edge-bar")
        hash = page.evaluate("location.hash")
        page.click("#edge-hop summary")  # opens the panel
        panel = page.inner_text("#edge-hop")
        page.screenshot(path=str(tmp_path / f"trace-edge-{width}.png"), full_page=True)
    assert over == 0
    assert edge["y"] < span["y"]  # the edge row above the model's span
    assert edge["x"] < span["x"] and span["x"] + span["w"] < edge["x"] + edge["w"]
    assert origin["x"] + origin["w"] == pytest.approx(edge["x"] + edge["w"], abs=0.5)
    assert label == "edge edge-fra-1 \u00b7 MISS \u00b7 origin 50.0 ms"
    assert hash == "#edge-hop"  # the bar links to its panel
    assert (tmp_path / f"trace-edge-{width}.png").stat().st_size > 0
    assert "edge-fra-1" in panel and "80.0 ms" in panel and "50.0 ms" in panel and "trace id" in panel


@pytest.mark.chromium
@pytest.mark.parametrize("width", [1400, 390])
def test_the_trace_list_marks_the_trace_with_an_edge_hop(url: str, width: int, tmp_path: Path) -> None:
    with chromium() as browser:
        page = browser.new_page(viewport={"width": width, "height": 900})
        page.goto(f"{url}/traces?all=1", wait_until="load")
        over = page.evaluate(OVER)
        marks = page.eval_on_selector_all("a.edge-mark", "els => els.map(e => e.closest('tr').dataset.traceId)")
        mark = page.eval_on_selector("a.edge-mark", BOX)
        shown = page.eval_on_selector("a.edge-mark", "e => getComputedStyle(e).visibility")
        text = page.inner_text(f'tr[data-trace-id="{TID}"] td.edge-hop')
        before = page.eval_on_selector("a.edge-mark", "e => getComputedStyle(e, '::before').content")
        page.screenshot(path=str(tmp_path / f"trace-list-edge-{width}.png"), full_page=True)
        page.click("a.edge-mark")
        page.wait_for_load_state("load")
        landed = page.evaluate("location.pathname + location.hash")
    assert over == 0
    assert marks == [TID]  # the joined trace only
    assert shown == "visible" and mark["w"] > 0 and mark["x"] >= 0 and mark["x"] + mark["w"] <= width
    assert text == "edge-fra-1 \u00b7 MISS"
    # On a phone the row is a block with no header above it: the mark names itself ("edge ", drawn by the CSS).
    assert before == ('"edge "' if width == 390 else "none")
    assert landed == f"/traces/{TID}#edge-hop"
