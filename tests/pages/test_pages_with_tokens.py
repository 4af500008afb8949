"""Every page works under every token setting (issue 25): with ``server.read_token`` set, a page that reads the
sidecar's own API in-process must not come back with "Not available: ... answered 401". The sidecar here is
the default build (every area that serves a page), with something on every page: an alert, a change, an audit
row, a drift series and a trace."""

from __future__ import annotations

import base64
from pathlib import Path
from typing import Any

import httpx
import numpy as np
import pytest
from fastapi.responses import HTMLResponse
from fastapi.routing import APIRoute
from fastapi.testclient import TestClient
from pagetree import parse
from prometheus_client import CollectorRegistry
from test_status_pages import AM, NOW, Script, _f

from sidecar.app import all_routes, create_app
from sidecar.clock import FakeClock
from sidecar.config import parse_config
from sidecar.service import Service, default_factories
from sidecar.store import Store

DATA = Path(__file__).resolve().parents[1] / "data"
TRACE = "0bab5bd0e314f0235d3f705dcb58ec3c"  # a trace of tests/data/traces/otlp-traces-triton.json
READ, ADMIN, PUSH = "r34d-token", "adm1n-token", "pu5h-token"

# Every page, by route: the URL the test fetches for it (a route added without a line here fails the test).
PAGES = {
    "/": "/",
    "/alerts": "/alerts",
    "/changes": "/changes",
    "/audit": "/audit",
    "/drift": "/drift",
    "/drift/{rest:path}": "/drift/ctr/2/x",
    "/traces": "/traces?all=1",
    "/traces/{trace_id}": f"/traces/{TRACE}",
    "/runbooks/": "/runbooks/",
    "/runbooks/{name:path}": "/runbooks/FeatureDrifting.md",
}
SETTINGS = {
    "none": {},
    "read": {"read_token": READ},
    "read+admin": {"read_token": READ, "admin_token": ADMIN},
    "read+push": {"read_token": READ, "push_token": PUSH},
}


def _bearer(token: str | None) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"} if token else {}


def _basic(token: str) -> dict[str, str]:
    return {"Authorization": "Basic " + base64.b64encode(f"on-call:{token}".encode()).decode()}


def _service(tmp_path: Path, server: dict[str, Any]) -> tuple[Service, Script, FakeClock]:
    cfg = parse_config(
        {
            "server": server,
            "triton": {"enabled": False},
            "gpu": {"enabled": False},
            "alerting": {"enabled": True, "alertmanager": {"urls": [AM]}},
            "traces": {"enabled": True},
            "checks": {
                "drift": {
                    "enabled": True,
                    "method": "window",
                    "sustained_secs": 0,
                    "min_samples": 100,
                    "reference": {"mode": "pinned", "pinned_events": 200},
                }
            },
        }
    )
    clock = FakeClock(NOW)
    script = Script()
    svc = Service(
        cfg,
        clock=clock,
        registry=CollectorRegistry(),
        store=Store(tmp_path / "s.sqlite"),
        http=httpx.AsyncClient(transport=httpx.MockTransport(lambda r: httpx.Response(200, json={}))),
        factories=[*default_factories(), lambda ctx: [script]],
    )
    return svc, script, clock


def _fill(c: TestClient, svc: Service, script: Script, clock: FakeClock, push: str | None) -> None:
    """Something on every page, pushed the way clients push (with the push token where one is set)."""
    rng = np.random.default_rng(1)
    for shift in (0.0, 0.0, 1.0, 1.0):
        evs = [
            {"model": "ctr", "version": "2", "timestamp": clock.now(), "features": {"x": float(v)}}
            for v in rng.normal(shift, 1, 100)
        ]
        r = c.post("/v1/events", json=evs, headers=_bearer(push))
        assert r.status_code == 200 and r.json()["accepted"] == 100, r.text
        clock.advance(10 if shift == 0 else 1800)
    r = c.post("/v1/changes", json={"what": "feature pipeline v7", "who": "ana", "model": "ctr"}, headers=_bearer(push))
    assert r.status_code == 201, r.text
    body = (DATA / "traces" / "otlp-traces-triton.json").read_bytes()
    r = c.post("/v1/traces", content=body, headers={"content-type": "application/json", **_bearer(push)})
    assert r.status_code == 200, r.text
    script.findings = [_f("ctr_mean", True)]
    svc.evaluate_once(clock.now())


def _page_routes(app: Any) -> set[str]:
    """Every route that answers HTML (declared so, or tagged as a page)."""
    return {
        r.path
        for r in all_routes(app.routes)
        if isinstance(r, APIRoute) and ("pages" in (r.tags or []) or r.response_class is HTMLResponse)
    }


@pytest.mark.parametrize("setting", list(SETTINGS))
def test_every_page_reads_its_data_under_every_token_setting(tmp_path: Path, setting: str) -> None:
    server = SETTINGS[setting]
    svc, script, clock = _service(tmp_path, server)
    app = create_app(svc)
    assert _page_routes(app) == set(PAGES)  # a new page must be added to PAGES
    with TestClient(app) as c:
        _fill(c, svc, script, clock, server.get("push_token"))
        read = server.get("read_token")
        # A person in a browser (Basic) and a script (Bearer) both get every page whole.
        for creds in (_bearer(read), _basic(read)) if read else ({},):
            for url in PAGES.values():
                r = c.get(url, headers=creds)
                assert r.status_code == 200, (url, r.status_code, r.text[:300])
                text = parse(r.text).text()
                assert "Not available" not in text and "answered 401" not in text, (url, text[:2000])
        if read:
            for url in PAGES.values():  # and the pages themselves stay closed without the token
                assert c.get(url).status_code == 401, url
    # What each page read is really there (not an empty page that says nothing is missing).
    with TestClient(app) as c:
        creds = _bearer(server.get("read_token"))
        assert "CtrMean" in c.get("/alerts", headers=creds).text
        assert "feature pipeline v7" in c.get("/changes", headers=creds).text
        assert "feature pipeline v7" in c.get("/audit", headers=creds).text
        assert TRACE in c.get("/traces?all=1", headers=creds).text
    # No in-process read of any page failed (the counter a 401 there would move).
    errors = [s for f in svc.registry.collect() if f.name == "sidecar_page_source_errors" for s in f.samples]
    assert [s for s in errors if s.name.endswith("_total") and s.value] == []


def test_a_page_reads_with_its_callers_token_not_more(tmp_path: Path) -> None:
    """The in-process read carries the caller's credentials: the admin token (which opens reads) reads the
    pages whole; the push token opens no page."""
    svc, script, clock = _service(tmp_path, {"read_token": READ, "admin_token": ADMIN, "push_token": PUSH})
    with TestClient(create_app(svc)) as c:
        _fill(c, svc, script, clock, PUSH)
        for url in ("/", "/alerts", "/changes", "/audit", "/drift"):
            r = c.get(url, headers=_bearer(ADMIN))
            assert r.status_code == 200 and "Not available" not in parse(r.text).text(), url
            assert c.get(url, headers=_bearer(PUSH)).status_code == 401, url
