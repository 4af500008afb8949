"""One rule for every GET list API's parameters (sidecar.listparams), and what POST /v1/changes accepts
matching what POST /v1/events accepts: an unknown parameter or a limit out of range is a 400 naming it (never
clamped or ignored), counted; an integer version is a version; any Unicode a model name may hold can be
filtered on (the alert's audit_url finds its rows); a change dated too far ahead is refused."""

from __future__ import annotations

from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import httpx
import pytest
from alerting_helpers import make_service
from fastapi import FastAPI, Request
from prometheus_client import CollectorRegistry

from sidecar.app import create_app
from sidecar.clock import FakeClock
from sidecar.listparams import ListParamError, ListParams, check
from sidecar.service import Service

T0 = 1_700_000_000.0
CFG: dict[str, Any] = {
    "server": {"push_token": "s3cret"},
    "alerting": {"enabled": True, "changes": {"poll_repository": False}},
}
AUTH = {"Authorization": "Bearer s3cret"}
LIST_ROUTES = ["/v1/changes", "/v1/audit", "/v1/alerts", "/v1/audit/dead_letters"]


@pytest.fixture
async def api(tmp_path: Path) -> Any:
    svc = make_service(tmp_path, CFG, clock=FakeClock(T0))
    app = create_app(svc, manage_lifecycle=False)
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://sc") as c:
        yield svc, c


def _refused(svc: Service, route: str, reason: str) -> float:
    return svc.registry.get_sample_value("sidecar_api_queries_refused_total", {"route": route, "reason": reason}) or 0


@pytest.mark.parametrize("route", LIST_ROUTES)
@pytest.mark.parametrize("limit", ["-1", "0", "1001", "1e3", "abc", "", "٣"])
async def test_a_limit_out_of_range_is_refused_not_clamped(api: Any, route: str, limit: str) -> None:
    svc, c = api
    r = await c.get(route, params={"limit": limit})
    assert r.status_code == 400, r.text
    assert r.json()["detail"].startswith("limit: an integer from 1 to 1000")
    assert _refused(svc, route, "limit") == 1


@pytest.mark.parametrize("route", LIST_ROUTES)
async def test_a_limit_in_range_is_taken(api: Any, route: str) -> None:
    _, c = api
    for limit in ("1", "1000"):
        assert (await c.get(route, params={"limit": limit})).status_code == 200


@pytest.mark.parametrize("route", LIST_ROUTES)
async def test_unknown_parameters_are_refused_naming_them(api: Any, route: str) -> None:
    svc, c = api
    r = await c.get(route, params={"limt": "5", "colour": "red"})
    assert r.status_code == 400
    detail = r.json()["detail"]
    assert "unknown parameters 'limt', 'colour'" in detail and "allowed:" in detail and "limit" in detail
    assert _refused(svc, route, "unknown_parameter") == 1
    r = await c.get(route + "?limit=5&limit=6")
    assert r.status_code == 400 and r.json()["detail"] == "limit: given twice"


async def test_changes_limit_is_applied_and_filters_are_checked(api: Any) -> None:
    svc, c = api
    for i in range(5):
        r = await c.post("/v1/changes", json={"what": f"deploy {i}", "at": T0 - 100 + i}, headers=AUTH)
        assert r.status_code == 201
    r = await c.get("/v1/changes", params={"limit": "2"})
    assert [x["what"] for x in r.json()] == ["deploy 4", "deploy 3"]
    for params, says in [
        ({"since": "nan"}, "since: a finite number"),
        ({"since": "yesterday"}, "since: a finite number"),
        ({"model": ""}, "model: 1 to 200 characters"),
        ({"version": "v" * 201}, "version: 1 to 200 characters"),
    ]:
        r = await c.get("/v1/changes", params=params)
        assert r.status_code == 400 and r.json()["detail"].startswith(says), (params, r.text)
    assert _refused(svc, "/v1/changes", "value") == 4


async def test_an_integer_version_is_a_version_as_events_take_it(api: Any) -> None:
    _, c = api
    r = await c.post("/v1/changes", json={"what": "rollout", "model": "ctr", "version": 2, "at": T0}, headers=AUTH)
    assert r.status_code == 201, r.text
    (row,) = (await c.get("/v1/changes", params={"model": "ctr", "version": "2"})).json()
    assert row["version"] == "2"
    # A boolean is not a version.
    r = await c.post("/v1/changes", json={"what": "x", "version": True}, headers=AUTH)
    assert r.status_code == 400 and r.json()["detail"].startswith("version:")


async def test_a_change_dated_too_far_ahead_is_refused_naming_at(api: Any) -> None:
    svc, c = api
    r = await c.post("/v1/changes", json={"what": "from the future", "at": 4_070_908_800.0}, headers=AUTH)  # 2099
    assert r.status_code == 400 and r.json()["detail"].startswith("at: ")
    assert "in the future" in r.json()["detail"]
    r = await c.post("/v1/changes", json=[{"what": "ok", "at": T0}, {"what": "late", "at": T0 + 301}], headers=AUTH)
    assert r.status_code == 400 and r.json()["detail"].startswith("[1].at: 301 s in the future")
    assert svc.registry.get_sample_value("sidecar_http_refused_total", {"endpoint": "changes", "reason": "future"}) == 2
    assert (await c.get("/v1/changes")).json() == []  # nothing of a refused request is stored
    # Within the allowed skew (clocks differ a little) it is taken.
    r = await c.post("/v1/changes", json={"what": "a clock a bit ahead", "at": T0 + 299}, headers=AUTH)
    assert r.status_code == 201


async def test_the_future_bound_is_configurable(tmp_path: Path) -> None:
    cfg = {**CFG, "alerting": {**CFG["alerting"], "changes": {"poll_repository": False, "max_future_secs": 10}}}
    svc = make_service(tmp_path, cfg, clock=FakeClock(T0))
    app = create_app(svc, manage_lifecycle=False)
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://sc") as c:
        assert (await c.post("/v1/changes", json={"what": "a", "at": T0 + 11}, headers=AUTH)).status_code == 400
        assert (await c.post("/v1/changes", json={"what": "b", "at": T0 + 9}, headers=AUTH)).status_code == 201


async def test_a_unicode_model_is_filtered_and_its_audit_url_finds_its_rows(api: Any) -> None:
    from sidecar.alerting.config import TemplatesConfig
    from sidecar.alerting.render.annotations import Annotator
    from sidecar.model import Finding

    svc, c = api
    audit = svc.component("audit")
    audit.record("request", "r1", T0 - 10, {"model": "modèle", "version": "2", "trace_id": "t1"})
    audit.record("request", "r2", T0 - 5, {"model": "model", "version": "2", "trace_id": "t2"})
    r = await c.post("/v1/changes", json={"what": "déploiement", "model": "modèle", "at": T0 - 1}, headers=AUTH)
    assert r.status_code == 201
    f = Finding(check="ctr_mean", kind="business", active=True, severity="warning", labels={}, value=0.1)
    annotator = Annotator(
        TemplatesConfig(), registry=CollectorRegistry(), runbook_base="", dashboard_base=None, sidecar_url="http://sc"
    )
    url = urlsplit(annotator.annotate(f, {"model": "modèle", "version": "2"}, [])["audit_url"])
    assert url.path == "/audit"
    r = await c.get(f"/v1/audit?{url.query}")
    assert r.status_code == 200, r.text
    assert [e["id"] for e in r.json()["events"]] == ["r1"]
    r = await c.get("/v1/audit", params={"model": "modèle"})
    assert sorted(e["kind"] for e in r.json()["events"]) == ["change", "request"]
    r = await c.get("/v1/changes", params={"model": "modèle"})
    assert [x["what"] for x in r.json()] == ["déploiement"]
    for name in ("模型", "model with spaces", "emoji-🙂", "a'b\"c;--"):
        assert (await c.get("/v1/audit", params={"model": name})).status_code == 200


def test_check_is_one_rule() -> None:
    q = check([("model", "x"), ("limit", "7")], ("model",))
    assert q.params == {"model": "x", "limit": "7"} and q.limit == 7
    assert check([], ()).limit == 100 and check([], (), default_limit=None).limit is None
    with pytest.raises(ListParamError, match="limit: an integer from 1 to 50"):
        check([("limit", "51")], (), max_limit=50)
    with pytest.raises(ListParamError) as err:
        check([("model", "x")], ())
    assert err.value.reason == "unknown_parameter"


async def test_the_helper_answers_400_for_a_plain_route() -> None:
    reg = CollectorRegistry()
    app = FastAPI()
    lists = ListParams.of(reg)
    assert ListParams.of(reg) is lists  # one per registry

    @app.get("/things")
    async def things(request: Request) -> list[int]:
        q = lists.parse("/things", request, ("colour",))
        return list(range(q.limit or 0))

    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://t") as c:
        assert (await c.get("/things", params={"limit": "3"})).json() == [0, 1, 2]
        r = await c.get("/things", params={"size": "3"})
        assert r.status_code == 400 and "'size'" in r.json()["detail"]
