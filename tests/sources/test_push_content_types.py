"""POST /v1/events and /v1/changes read only the media types they can parse: any other Content-Type is a
counted 415 naming the accepted ones (and nothing is published); a missing Content-Type is read as JSON."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import httpx
import orjson
import pytest
from prometheus_client import CollectorRegistry

from sidecar.app import create_app
from sidecar.clock import FakeClock
from sidecar.config import parse_config
from sidecar.model import Batch
from sidecar.service import Service
from sidecar.store import Store
from sidecar.wiring.alerting import build as alerting_build
from sidecar.wiring.event_subs import subscribe_events
from sidecar.wiring.events import build as events_build

NOW = 1_700_000_000.0
EVENT = {"model": "m", "timestamp": NOW, "features": {"x": 1.0}}
CHANGE = {"what": "deploy v2", "model": "m"}


def _service(tmp_path: Path) -> tuple[Service, list[Batch]]:
    cfg = parse_config({"alerting": {"enabled": True}})
    svc = Service(
        cfg,
        clock=FakeClock(NOW),
        registry=CollectorRegistry(),
        store=Store(tmp_path / "s.sqlite"),
        http=httpx.AsyncClient(transport=httpx.MockTransport(lambda r: httpx.Response(200))),
        factories=[events_build, alerting_build],
    )
    seen: list[Batch] = []
    subscribe_events(svc.bus, "test", seen.append)  # columns too, as events
    svc.bus.subscribe("changes", "test", seen.append)
    return svc, seen


def _refused(svc: Service, endpoint: str) -> float:
    return (
        svc.registry.get_sample_value(
            "sidecar_http_refused_total", {"endpoint": endpoint, "reason": "unsupported_media_type"}
        )
        or 0.0
    )


@pytest.mark.parametrize(
    "path,body,endpoint", [("/v1/events", EVENT, "/v1/events"), ("/v1/changes", CHANGE, "changes")]
)
@pytest.mark.parametrize(
    "ctype",
    [
        "text/plain",
        "application/x-www-form-urlencoded",
        "application/xml",
        "multipart/form-data; boundary=x",
        "text/plain; note=ndjson",
        "json",
    ],
)
async def test_an_unsupported_content_type_is_a_counted_415_naming_the_accepted(
    tmp_path: Path, path: str, body: dict[str, Any], endpoint: str, ctype: str
) -> None:
    svc, seen = _service(tmp_path)
    app = create_app(svc, manage_lifecycle=False)
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://sc") as c:
        r = await c.post(path, content=orjson.dumps(body), headers={"content-type": ctype})
        assert r.status_code == 415, r.text
        assert "application/json" in r.json()["detail"] and "application/json" in r.headers["accept-post"]
    assert seen == [] and _refused(svc, endpoint) == 1


@pytest.mark.parametrize("path,body", [("/v1/events", EVENT), ("/v1/changes", CHANGE)])
@pytest.mark.parametrize(
    "ctype", [None, "application/json", "Application/JSON; charset=utf-8", "application/vnd.acme+json"]
)
async def test_json_types_and_a_missing_content_type_are_read(
    tmp_path: Path, path: str, body: dict[str, Any], ctype: str | None
) -> None:
    svc, seen = _service(tmp_path)
    app = create_app(svc, manage_lifecycle=False)
    headers = {"content-type": ctype} if ctype else {}
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://sc") as c:
        r = await c.post(path, content=orjson.dumps(body), headers=headers)
        assert r.status_code in (200, 201), r.text
    assert len(seen) == 1


@pytest.mark.parametrize("ctype", ["application/x-ndjson", "application/jsonl", "application/json-seq"])
async def test_events_in_json_lines_types_are_read_line_by_line(tmp_path: Path, ctype: str) -> None:
    svc, seen = _service(tmp_path)
    app = create_app(svc, manage_lifecycle=False)
    sep = b"\x1e" if ctype.endswith("json-seq") else b""  # RFC 7464 records start with RS
    body = b"".join(sep + orjson.dumps(EVENT) + b"\n" for _ in range(3))
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://sc") as c:
        r = await c.post("/v1/events", content=body, headers={"content-type": ctype})
        assert r.status_code == 200 and r.json()["accepted"] == 3, r.text
    assert len(seen[0].items) == 3
