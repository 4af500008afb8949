"""The actions admin API (admin token): pause and resume every action, clear a revert's hold, read the state."""

from __future__ import annotations

from typing import Any, Protocol

from fastapi import APIRouter, Request

from sidecar.httpguard import RequestGuard

__all__ = ["ActionsAdmin", "actions_router"]


class ActionsAdmin(Protocol):
    def pause(self, paused: bool) -> None: ...

    def clear(self, model: str) -> bool: ...

    def describe(self) -> dict[str, Any]: ...


def actions_router(layer: ActionsAdmin, guard: RequestGuard) -> APIRouter:
    router = APIRouter()
    base = "/admin/actions"

    @router.get(base, tags=["actions"], summary="Actions: paused, holds, recent records and plans")
    async def state(request: Request) -> dict[str, Any]:
        guard.authorize(request, "admin", base)
        return layer.describe()

    @router.post(f"{base}/pause", tags=["actions"], summary="Stop all actions (queued ones are dropped)")
    async def pause(request: Request) -> dict[str, Any]:
        guard.authorize(request, "admin", f"{base}/pause")
        layer.pause(True)
        return {"paused": True}

    @router.post(f"{base}/resume", tags=["actions"], summary="Let actions run again")
    async def resume(request: Request) -> dict[str, Any]:
        guard.authorize(request, "admin", f"{base}/resume")
        layer.pause(False)
        return {"paused": False}

    @router.post(f"{base}/clear", tags=["actions"], summary="Clear a revert's hold on a model (?model=NAME)")
    async def clear(request: Request, model: str = "") -> dict[str, Any]:
        ep = f"{base}/clear"
        guard.authorize(request, "admin", ep)
        if not model:
            raise guard.refuse(ep, "invalid", 400, "model: required (?model=NAME)")
        if len(model) > 200:
            raise guard.refuse(ep, "invalid", 400, "model: at most 200 characters")
        return {"model": model, "cleared": layer.clear(model)}

    return router
