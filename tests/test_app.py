from __future__ import annotations

import gzip
import re
from typing import Any

from fastapi import APIRouter, Request
from fastapi.testclient import TestClient
from pydantic import SecretStr

from sidecar.app import create_app
from sidecar.clock import FakeClock
from sidecar.component import Context, Readiness, Role
from sidecar.config import parse_config
from sidecar.service import Service
from sidecar.store import Store


class Echo:
    """A push component that only uses the shared guard: auth, admission, body limits."""

    name = "echo"
    role = Role.SOURCE

    def __init__(self, ctx: Context, ready: bool = True) -> None:
        self.ctx = ctx
        self.ready = ready

    async def start(self) -> None: ...

    async def shutdown(self) -> None: ...

    def readiness(self) -> Readiness:
        return Readiness(self.ready, "echo detail")

    def routes(self) -> APIRouter:
        router = APIRouter()
        guard = self.ctx.guard

        @router.post("/v1/echo")
        async def echo(request: Request) -> dict[str, int]:
            guard.authorize(request, "push", "echo")
            async with guard.admit("echo"):
                body = await guard.read_body(request, "echo")
            return {"bytes": len(body)}

        return router


def client(ready: bool = True, **server: Any) -> tuple[TestClient, Service]:
    cfg = parse_config({"server": {"max_body_bytes": 1000, **server}, "triton": {"enabled": False}})
    svc = Service(cfg, clock=FakeClock(), store=Store(":memory:"), factories=[lambda ctx: [Echo(ctx, ready)]])
    return TestClient(create_app(svc)), svc


def refused(svc: Service, reason: str) -> float:
    return svc.registry.get_sample_value("sidecar_http_refused_total", {"endpoint": "echo", "reason": reason}) or 0


def test_health_ready_and_metrics() -> None:
    c, _ = client()
    with c:
        assert c.get("/healthz").json() == {"status": "ok"}
        r = c.get("/readyz")
        assert r.status_code == 200 and r.json()["components"] == {"echo": "ok: echo detail"}
        assert "sidecar_http_inflight_requests" in c.get("/metrics").text
    c, _ = client(ready=False)
    with c:
        assert c.get("/readyz").status_code == 503
        assert c.get("/healthz").status_code == 200


def test_bearer_token_is_required_and_refusals_are_counted() -> None:
    c, svc = client(push_token="s3cret")
    with c:
        assert c.post("/v1/echo", content=b"x").status_code == 401
        assert c.post("/v1/echo", content=b"x", headers={"Authorization": "Bearer wrong"}).status_code == 401
        r = c.post("/v1/echo", content=b"xyz", headers={"Authorization": "Bearer s3cret"})
        assert r.status_code == 200 and r.json() == {"bytes": 3}
    assert refused(svc, "unauthorized") == 2


def test_body_limits_before_and_after_decompression() -> None:
    c, svc = client()
    with c:
        assert c.post("/v1/echo", content=b"x" * 1001).status_code == 413
        ok = gzip.compress(b"y" * 900)
        r = c.post("/v1/echo", content=ok, headers={"Content-Encoding": "gzip"})
        assert r.json() == {"bytes": 900}
        # The first 999 bytes of a 50 MB gzip bomb already inflate past the limit: refused before inflating more.
        bomb = gzip.compress(b"\0" * 50_000_000)
        r = c.post("/v1/echo", content=bomb[:999], headers={"Content-Encoding": "gzip"})
        assert r.status_code == 413
        small_bomb = gzip.compress(b"\0" * 100_000)
        assert len(small_bomb) < 1000
        r = c.post("/v1/echo", content=small_bomb, headers={"Content-Encoding": "gzip"})
        assert r.status_code == 413 and "decompressed" in r.json()["detail"]
        r = c.post("/v1/echo", content=b"not gzip", headers={"Content-Encoding": "gzip"})
        assert r.status_code == 400
        r = c.post("/v1/echo", content=b"x", headers={"Content-Encoding": "br"})
        assert r.status_code == 415
        assert c.get("/healthz").status_code == 200
    assert refused(svc, "too_large") == 3
    assert refused(svc, "bad_encoding") >= 2


def test_secret_tokens_never_show_in_config_dumps() -> None:
    cfg = parse_config({"server": {"push_token": "s3cret", "admin_token": "adm1n"}})
    assert isinstance(cfg.server.push_token, SecretStr)
    dumped = cfg.model_dump_json() + repr(cfg) + str(cfg)
    assert "s3cret" not in dumped and "adm1n" not in dumped


def test_metrics_negotiates_openmetrics_for_exemplars() -> None:
    c, _ = client()
    with c:
        plain = c.get("/metrics")
        assert plain.headers["content-type"].startswith("text/plain")
        om = c.get("/metrics", headers={"Accept": "application/openmetrics-text; version=1.0.0"})
        assert om.headers["content-type"].startswith("application/openmetrics-text")
        assert om.text.rstrip().endswith("# EOF")


def test_a_failing_check_or_sink_is_counted_and_the_round_goes_on() -> None:
    from sidecar.model import Finding

    class Boom:
        name = "boom"
        role = "check"

        def evaluate(self, now: float) -> list[Finding]:
            raise RuntimeError("broken check")

    class Fine:
        name = "fine"
        role = "check"

        def evaluate(self, now: float) -> list[Finding]:
            return [Finding(check="fine", kind="slo", labels={}, active=False, value=1.0)]

    class BadSink:
        name = "bad_sink"
        role = "sink"

        def on_findings(self, findings: list[Finding], now: float) -> None:
            raise RuntimeError("broken sink")

    cfg = parse_config({"triton": {"enabled": False}})
    svc = Service(cfg, clock=FakeClock(), store=Store(":memory:"), factories=[lambda ctx: [Boom(), Fine(), BadSink()]])
    findings = svc.evaluate_once()
    assert [f.check for f in findings] == ["fine"]
    assert svc.registry.get_sample_value("sidecar_check_evaluation_errors_total", {"check": "boom"}) == 1
    assert svc.registry.get_sample_value("sidecar_finding_sink_errors_total", {"sink": "bad_sink"}) == 1


def test_a_read_token_gates_pages_metrics_and_docs_but_not_probes() -> None:
    import base64

    c, svc = client(read_token="r34d")
    with c:
        for path in ("/metrics", "/docs", "/openapi.json", "/"):
            r = c.get(path)
            assert r.status_code == 401, path
            assert r.headers["www-authenticate"].startswith("Basic")  # a browser asks the person once
        assert c.get("/healthz").status_code == 200 and c.get("/readyz").status_code == 200
        assert c.get("/metrics", headers={"Authorization": "Bearer r34d"}).status_code == 200
        basic = base64.b64encode(b"anyone:r34d").decode()
        assert c.get("/docs", headers={"Authorization": f"Basic {basic}"}).status_code == 200
        wrong = base64.b64encode(b"anyone:nope").decode()
        assert c.get("/", headers={"Authorization": f"Basic {wrong}"}).status_code == 401
        # Pushes are not reads: the read token neither opens nor closes them.
        assert c.post("/v1/echo", content=b"x").status_code == 200
    assert (
        svc.registry.get_sample_value("sidecar_http_refused_total", {"endpoint": "read", "reason": "unauthorized"}) == 5
    )


def test_without_a_read_token_everything_stays_readable() -> None:
    c, _ = client()
    with c:
        assert c.get("/metrics").status_code == 200 and c.get("/docs").status_code == 200


def test_docs_load_their_assets_from_the_sidecar_not_a_cdn() -> None:
    c, _ = client()
    with c:
        page = c.get("/docs").text
        assert "cdn.jsdelivr" not in page and "unpkg" not in page
        for asset in ("/static/swagger-ui/swagger-ui-bundle.js", "/static/swagger-ui/swagger-ui.css"):
            assert asset in page
            r = c.get(asset)
            assert r.status_code == 200 and len(r.content) > 10_000
        paths = c.get("/openapi.json").json()["paths"]
        assert {"/healthz", "/readyz", "/metrics", "/v1/echo"} <= set(paths)


class _Leaky(Echo):
    name = "leaky"

    def readiness(self) -> Readiness:
        return Readiness(False, "scrape of http://scraper:pa55word@triton:8002/metrics failed: connect")


def test_readiness_never_shows_a_password_in_a_url() -> None:
    cfg = parse_config({"triton": {"enabled": False}})
    svc = Service(cfg, clock=FakeClock(), store=Store(":memory:"), factories=[lambda ctx: [_Leaky(ctx)]])
    with TestClient(create_app(svc)) as c:
        body = c.get("/readyz").text
    assert "pa55word" not in body and "scraper:***@triton:8002" in body


async def test_a_slow_body_gets_408_and_frees_its_slot() -> None:
    import asyncio

    cfg = parse_config(
        {"server": {"body_timeout_secs": 0.05, "max_inflight_requests": 1}, "triton": {"enabled": False}}
    )
    svc = Service(cfg, clock=FakeClock(), store=Store(":memory:"), factories=[lambda ctx: [Echo(ctx)]])
    app = create_app(svc, manage_lifecycle=False)
    never = asyncio.Event()
    sent: list[dict[str, Any]] = []

    async def receive() -> dict[str, Any]:
        if not sent:
            sent.append({})
            return {"type": "http.request", "body": b"x", "more_body": True}
        await never.wait()  # the rest of the body never comes
        return {"type": "http.disconnect"}

    out: list[dict[str, Any]] = []

    async def send(msg: dict[str, Any]) -> None:
        out.append(msg)

    scope = {
        "type": "http",
        "method": "POST",
        "path": "/v1/echo",
        "headers": [],
        "query_string": b"",
        "http_version": "1.1",
        "scheme": "http",
        "server": ("t", 80),
        "client": ("c", 1),
        "root_path": "",
    }
    await app(scope, receive, send)
    assert out[0]["status"] == 408
    assert refused(svc, "body_timeout") == 1
    assert svc.guard.admission.inflight("echo") == 0  # the slot is free again for the next push


def test_docs_list_every_route_of_the_full_service(tmp_path: Any) -> None:
    from starlette.routing import Route

    from sidecar.app import all_routes

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
    app = create_app(Service(cfg, clock=FakeClock()), manage_lifecycle=False)
    # OpenAPI writes {name:path} as {name}.
    routes = {re.sub(r":\w+}", "}", r.path) for r in all_routes(app.routes) if isinstance(r, Route)}
    routes -= {"/docs", "/openapi.json"}
    routes = {p for p in routes if not p.startswith("/static/")}
    listed = set(TestClient(app).get("/openapi.json").json()["paths"])
    assert routes - listed == set()
    assert {"/", "/alerts", "/traces", "/v1/traces", "/v1/events", "/v1/changes", "/v1/alerts"} <= listed
