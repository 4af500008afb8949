"""HEAD works wherever GET works: every GET route of the full service answers HEAD with the GET's status and
headers and no body."""

from __future__ import annotations

import re
from pathlib import Path

from fastapi.testclient import TestClient
from starlette.routing import Route

from sidecar.app import all_routes, create_app
from sidecar.clock import FakeClock
from sidecar.config import parse_config
from sidecar.service import Service

PKG = Path(__file__).resolve().parents[1] / "sidecar"
# A real value for each path parameter where one exists, so most routes answer 200, not 404.
SAMPLES = {
    "/runbooks/{name:path}": sorted(p.name for p in (PKG / "alerting/runbooks").glob("*.md"))[0],
    "/static/pages/{name}": "pages.css",
}


def _full_app(tmp_path: Path) -> TestClient:
    cfg = parse_config(
        {
            "triton": {"enabled": False},
            "store": {"path": str(tmp_path / "s.sqlite")},
            "gpu": {"enabled": False},
            "traces": {"enabled": True},
            "events": {"enabled": True},
            "alerting": {"enabled": True},
            "checks": {"drift": {"enabled": True}},
        }
    )
    return TestClient(create_app(Service(cfg, clock=FakeClock()), manage_lifecycle=False))


def _concrete(path: str) -> str:
    return re.sub(r"\{[^}]+\}", SAMPLES.get(path, "x"), path)


def test_every_get_route_answers_head_with_the_same_status_and_headers_and_no_body(tmp_path: Path) -> None:
    client = _full_app(tmp_path)
    paths = sorted(
        {_concrete(r.path) for r in all_routes(client.app.routes) if isinstance(r, Route) and "GET" in r.methods}
    )
    assert len(paths) >= 20, paths  # the route table was read, not an empty app
    ok = 0
    for path in paths:
        got = client.get(path)
        head = client.head(path)
        assert head.status_code == got.status_code != 405, (path, got.status_code, head.status_code)
        assert head.content == b"", path
        assert head.headers.get("content-type") == got.headers.get("content-type"), path
        if "content-length" in got.headers and got.headers.get("content-encoding") is None:
            # The GET's length: for a page that renders a timestamp it may differ by a digit, never be 0.
            assert int(head.headers["content-length"]) > 0, path
        ok += got.status_code == 200
    assert ok >= len(paths) - 2, (ok, paths)  # only the dummy ids (a trace, a drift detail) may fail


def test_other_methods_pass_through_untouched(tmp_path: Path) -> None:
    client = _full_app(tmp_path)
    assert client.post("/v1/events", json={"name": "x"}).status_code != 405
    assert client.head("/v1/events").status_code == 405  # POST-only: HEAD is a GET there, and GET is not served
