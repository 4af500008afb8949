"""The FastAPI app: /metrics, /healthz, /readyz, and every component's routes (the pages, ``/`` included, are
the pages components' routes: ``sidecar.pages``)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from fastapi import FastAPI, Request, Response
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse

from sidecar import __version__
from sidecar.exposition import render_metrics
from sidecar.service import Service

__all__ = ["create_app"]


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

    app = FastAPI(title="Triton sidecar", version=__version__, lifespan=lifespan, docs_url="/docs",
                  redoc_url=None)
    app.state.service = service

    @app.exception_handler(RequestValidationError)
    async def _validation(_: Request, exc: RequestValidationError) -> JSONResponse:
        errs = exc.errors()
        first = errs[0] if errs else {"loc": (), "msg": "invalid request"}
        path = ".".join(str(p) for p in first["loc"])
        return JSONResponse(status_code=400, content={"error": f"{path}: {first['msg']}", "errors": len(errs)})

    @app.get("/healthz", include_in_schema=False)
    async def healthz() -> dict[str, str]:
        return {"status": "ok"}

    @app.get("/readyz", include_in_schema=False)
    async def readyz() -> JSONResponse:
        ok, details = service.readiness()
        return JSONResponse(status_code=200 if ok else 503,
                            content={"status": "ready" if ok else "not ready", "components": details})

    @app.get("/metrics", include_in_schema=False)
    async def metrics(request: Request) -> Response:
        body, content_type = render_metrics(service.registry, request.headers.get("accept"))
        return Response(body, media_type=content_type)

    for router in service.routers():
        app.include_router(router)
    return app
