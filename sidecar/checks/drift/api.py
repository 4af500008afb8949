"""The drift admin API: list references and specs, change a model's reference (admin token)."""

from __future__ import annotations

from typing import Any, Protocol

import orjson
from fastapi import APIRouter, HTTPException, Request
from pydantic import ValidationError

from sidecar.checks.drift.config import ReferenceConfig
from sidecar.errors import ConfigError
from sidecar.httpguard import RequestGuard

__all__ = ["DriftAdmin", "drift_router"]


class DriftAdmin(Protocol):
    """What the admin API needs of the drift check (a protocol, so this module does not import the check)."""

    def describe_references(self) -> Any: ...

    def describe_specs(self) -> Any: ...

    def set_reference(self, model: str, spec: ReferenceConfig, *, who: str) -> Any: ...


def drift_router(check: DriftAdmin, guard: RequestGuard) -> APIRouter:
    router = APIRouter()
    ep = "/admin/drift/references"

    @router.get(ep, tags=["drift"])
    async def list_references(request: Request) -> dict[str, object]:
        guard.authorize(request, "admin", ep)
        return {"references": check.describe_references(), "specs": check.describe_specs()}

    ep_put = "/admin/drift/references/{model}"

    @router.put(ep_put, tags=["drift"])
    async def put_reference(model: str, request: Request) -> dict[str, object]:
        guard.authorize(request, "admin", ep_put)
        body = await guard.read_body(request, ep_put)
        try:
            doc = orjson.loads(body) if body else {}
            if not isinstance(doc, dict):
                raise ValueError("body must be a JSON object")
            who = str(doc.pop("who", "") or "")[:200]
            spec = ReferenceConfig.model_validate(doc)
        except ValidationError as exc:
            first = exc.errors()[0]
            loc = ".".join(str(p) for p in first["loc"]) or "body"
            raise guard.refuse(ep_put, "invalid", 400, f"{loc}: {first['msg']}") from None
        except ValueError as exc:
            raise guard.refuse(ep_put, "invalid", 400, str(exc)) from None
        try:
            check.set_reference(model, spec, who=who)
        except ConfigError as exc:
            raise HTTPException(400, str(exc)) from None
        return {"model": model, "reference": spec.model_dump()}

    return router
