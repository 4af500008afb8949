"""The FastAPI app: /metrics, /healthz, /readyz, and every component's routes (the pages, ``/`` included, are
the pages components' routes: ``sidecar.pages``)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

from fastapi import FastAPI, HTTPException, Request, Response
from fastapi.exceptions import RequestValidationError
from fastapi.openapi.docs import get_swagger_ui_html
from fastapi.responses import HTMLResponse, JSONResponse
from fastapi.staticfiles import StaticFiles
from starlette.types import ASGIApp, Receive, Scope, Send

from sidecar import __version__
from sidecar.exposition import render_metrics
from sidecar.httphead import HeadAsGet
from sidecar.redact import mask_text
from sidecar.service import Service

__all__ = ["all_routes", "create_app"]


def create_app(service: Service, *, manage_lifecycle: bool = True) -> FastAPI:
    @asynccontextmanager
    async def lifespan(_: FastAPI) -> AsyncIterator[None]:
        if manage_lifecycle:
            await service.start()
        try:
            yield
        finally:
            if manage_lifecycle:
                await service.shutdown()

    # The stock /docs loads Swagger UI from a CDN and is blank offline; Swagger UI 5 (it reads the OpenAPI 3.1
    # FastAPI writes) is served from the fastapi-offline wheel instead.
    app = FastAPI(title="Triton sidecar", version=__version__, lifespan=lifespan, docs_url=None, redoc_url=None)
    app.state.service = service
    if service.guard.requires("read"):
        app.add_middleware(_ReadGate, service=service)
    app.add_middleware(HeadAsGet)  # outermost: HEAD is a GET whose body is dropped, wherever GET works
    _mount_docs(app)

    @app.exception_handler(RequestValidationError)
    async def _validation(_: Request, exc: RequestValidationError) -> JSONResponse:
        errs = exc.errors()
        first = errs[0] if errs else {"loc": (), "msg": "invalid request"}
        path = ".".join(str(p) for p in first["loc"])
        return JSONResponse(status_code=400, content={"error": f"{path}: {first['msg']}", "errors": len(errs)})

    @app.get("/healthz", tags=["probes"])
    async def healthz() -> dict[str, str]:
        return {"status": "ok"}

    @app.get("/readyz", tags=["probes"])
    async def readyz() -> JSONResponse:
        ok, details = service.readiness()
        return JSONResponse(
            status_code=200 if ok else 503,
            content={"status": "ready" if ok else "not ready", "components": _masked(details)},
        )

    @app.get("/metrics", tags=["metrics"])
    async def metrics(request: Request) -> Response:
        body, content_type = render_metrics(service.registry, request.headers.get("accept"))
        return Response(body, media_type=content_type)

    for router in service.routers():
        app.include_router(router)
    _list_plain_routes(app)
    return app


_OPEN_PATHS = frozenset({"/healthz", "/readyz"})


def _masked(value: object) -> object:
    if isinstance(value, str):
        return mask_text(value)
    if isinstance(value, dict):
        return {k: _masked(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_masked(v) for v in value]
    return value


def _mount_docs(app: FastAPI) -> None:
    try:
        from importlib import resources

        assets = resources.files("fastapi_offline") / "static"
    except ImportError:  # without the package there is no offline UI; the schema at /openapi.json still works
        return
    app.mount("/static/swagger-ui", StaticFiles(directory=str(assets)), name="swagger-ui")

    @app.get("/docs", include_in_schema=False)
    async def docs() -> HTMLResponse:
        return get_swagger_ui_html(
            openapi_url="/openapi.json",
            title="Triton sidecar API",
            swagger_js_url="/static/swagger-ui/swagger-ui-bundle.js",
            swagger_css_url="/static/swagger-ui/swagger-ui.css",
            swagger_favicon_url="/static/swagger-ui/favicon.png",
        )


class _ReadGate:
    """Asks for the read token on every GET/HEAD but the probes.

    Gated once here rather than in every component's router. Plain ASGI (not BaseHTTPMiddleware) so pushes
    pass straight through without their bodies being re-streamed. Probes stay open: a kubelet cannot send a
    token, and /readyz prints nothing secret (URLs are masked).
    """

    def __init__(self, app: ASGIApp, service: Service) -> None:
        self.app = app
        self.guard = service.guard

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http" and scope["method"] in ("GET", "HEAD") and scope["path"] not in _OPEN_PATHS:
            try:
                self.guard.authorize(Request(scope), "read", "read")
            except HTTPException as exc:
                resp = JSONResponse(status_code=exc.status_code, content={"detail": exc.detail}, headers=exc.headers)
                await resp(scope, receive, send)
                return
        await self.app(scope, receive, send)


def _list_plain_routes(app: FastAPI) -> None:
    """Put routes that are plain Starlette ones (the OTLP receiver is an ASGI object, for speed) in the schema too,
    so /docs lists every endpoint."""
    from fastapi.openapi.utils import get_openapi
    from fastapi.routing import APIRoute
    from starlette.routing import Route

    def schema() -> dict[str, object]:
        if app.openapi_schema is None:
            doc = get_openapi(title=app.title, version=app.version, routes=app.routes)
            paths = doc.setdefault("paths", {})
            for r in all_routes(app.routes):
                if isinstance(r, Route) and not isinstance(r, APIRoute) and r.path not in paths and r.methods:
                    summary = (getattr(r.endpoint, "__doc__", "") or r.name or "").strip().splitlines()[0:1]
                    paths[r.path] = {
                        m.lower(): {
                            "summary": summary[0] if summary else r.path,
                            "responses": {"200": {"description": "OK"}},
                        }
                        for m in sorted(r.methods)
                        if m != "HEAD"
                    }
            app.openapi_schema = doc
        return app.openapi_schema

    app.openapi = schema  # type: ignore[method-assign]


def all_routes(routes: list[Any]) -> list[Any]:
    """Every route, including those of included routers (FastAPI keeps those behind a wrapper; our routers
    have no prefix)."""
    out: list[Any] = []
    for r in routes:
        inner = getattr(r, "original_router", None)
        out.extend(all_routes(list(inner.routes)) if inner is not None else [r])
    return out
