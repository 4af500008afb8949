"""``/`` carries one line of edge findings: each SLA group's ratio against target and projection, and what fires."""

from __future__ import annotations

import html
import logging
from pathlib import Path
from typing import Any

import httpx
from fastapi.testclient import TestClient
from prometheus_client import CollectorRegistry

from sidecar.app import create_app
from sidecar.clock import FakeClock
from sidecar.component import Context
from sidecar.config import parse_config
from sidecar.pages.edge_line import edge_line
from sidecar.pages.readers import Api
from sidecar.pages.status import StatusPages
from sidecar.processors.edge_record import EdgeRecord
from sidecar.service import Service
from sidecar.store import Store
from sidecar.wiring.alerting import build as alerting
from sidecar.wiring.edge import build as edge

DAY0 = 1_764_892_800.0


def _page(ctx: Context) -> list[Any]:
    return [StatusPages(registry=ctx.registry, clock=ctx.clock, api=Api(ctx.registry, logging.getLogger("t")))]


def test_the_line_is_absent_without_edge_checks() -> None:
    assert edge_line(CollectorRegistry()) is None


def test_status_page_shows_the_ratio_the_projection_and_what_fires(tmp_path: Path) -> None:
    cfg = parse_config({"alerting": {"enabled": True}, "edge": {"enabled": True}})
    svc = Service(
        cfg,
        clock=FakeClock(DAY0 + 3600),
        registry=CollectorRegistry(),
        store=Store(tmp_path / "s.sqlite"),
        http=httpx.AsyncClient(transport=httpx.MockTransport(lambda r: httpx.Response(200, json={}))),
        factories=[alerting, edge, _page],
    )
    series = svc.component("edge_series")
    for m in range(60):
        hits = 95 if m < 20 else 20  # 40 minutes missing 80%: the 1h window burns 6.9x, the 5m one 10x
        series.observe(
            [
                EdgeRecord(DAY0 + m * 60 + 1, "/w", "HIT" if i < hits else "MISS", 0.01, None, 200, "n1")
                for i in range(100)
            ]
        )
    svc.evaluate_once(DAY0 + 3600 - 30)
    line = edge_line(svc.registry)
    assert line is not None
    assert line.startswith("all 45% this period (SLA 92%, projected 45%)")  # the last hour is all of it
    assert "all burning its SLA" in line
    with TestClient(create_app(svc, manage_lifecycle=False)) as client:
        page = html.unescape(client.get("/").text)
    assert f'id="edge-line">edge: {line}</p>' in page
