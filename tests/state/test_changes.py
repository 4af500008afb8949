"""The change log: POST/GET /v1/changes, persistence and bounds."""

from __future__ import annotations

import gzip
from pathlib import Path
from typing import Any

import httpx
import orjson
from alerting_helpers import make_service
from prometheus_client import CollectorRegistry

from sidecar.app import create_app
from sidecar.clock import FakeClock
from sidecar.model import Change
from sidecar.store import Store

T0 = 1_700_000_000.0
CFG: dict[str, Any] = {
    "server": {"push_token": "s3cret"},
    "triton": {"http_url": "http://triton:8000"},
    "alerting": {"enabled": True, "changes": {"max_changes": 3}},
}
AUTH = {"Authorization": "Bearer s3cret"}


async def test_post_and_get_changes(tmp_path: Path) -> None:
    svc = make_service(tmp_path, CFG, clock=FakeClock(T0))
    app = create_app(svc, manage_lifecycle=False)
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://sc") as c:
        r = await c.post(
            "/v1/changes",
            json={
                "what": "feature PR#221",
                "who": "ci",
                "model": "rec",
                "link": "https://github.com/acme/rec/pull/221",
            },
            headers=AUTH,
        )
        assert r.status_code == 201, r.text
        (cid,) = r.json()["ids"]
        # The same change posted again (a CI retry) is recorded once.
        body = gzip.compress(
            orjson.dumps(
                [
                    {
                        "what": "feature PR#221",
                        "who": "ci",
                        "model": "rec",
                        "link": "https://github.com/acme/rec/pull/221",
                        "at": T0,
                    }
                ]
            )
        )
        r = await c.post("/v1/changes", content=body, headers={**AUTH, "Content-Encoding": "gzip"})
        assert r.status_code == 200 and r.json()["ids"] == [cid]  # 200: nothing new was created
        r = await c.get("/v1/changes", params={"model": "rec"})
        assert [x["what"] for x in r.json()] == ["feature PR#221"]
        assert r.json()[0]["at_iso"] == "2023-11-14T22:13:20.000Z"
        assert (await c.get("/v1/changes", params={"model": "other"})).json() == []
    await svc.shutdown()


async def test_bad_change_requests_get_clear_4xx(tmp_path: Path) -> None:
    reg = CollectorRegistry()
    svc = make_service(tmp_path, CFG, registry=reg)
    app = create_app(svc, manage_lifecycle=False)
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://sc") as c:
        assert (await c.post("/v1/changes", json={"what": "x"})).status_code == 401
        r = await c.post("/v1/changes", content=b"{not json", headers=AUTH)
        assert r.status_code == 400 and "not JSON" in r.json()["detail"]
        r = await c.post("/v1/changes", json={"who": "ci"}, headers=AUTH)
        assert r.status_code == 400 and r.json()["detail"].startswith("what:")
        r = await c.post("/v1/changes", json=[{"what": "ok"}, {"what": "x", "colour": "red"}], headers=AUTH)
        assert r.status_code == 400 and r.json()["detail"].startswith("[1].colour")
    assert reg.get_sample_value("sidecar_http_refused_total", {"endpoint": "changes", "reason": "invalid"}) == 2
    assert svc.component("changes").recent(None, None, 0) == []  # type: ignore[attr-defined]
    await svc.shutdown()


def test_changes_persist_and_are_bounded(tmp_path: Path) -> None:
    store = Store(tmp_path / "s.sqlite")
    reg = CollectorRegistry()
    svc = make_service(tmp_path, CFG, store=store, registry=reg)
    log: Any = svc.component("changes")
    for i in range(5):
        log.record(Change(what=f"deploy {i}", at=T0 + i, model="rec"))
    assert reg.get_sample_value("sidecar_changes_evicted_total") == 2
    svc2 = make_service(tmp_path, CFG, store=store)
    log2: Any = svc2.component("changes")
    assert [c.what for c in log2.recent("rec", None, 0)] == ["deploy 4", "deploy 3", "deploy 2"]
    assert [c.what for c in log2.recent("rec", None, T0 + 4)] == ["deploy 4"]
    store.close()
