"""``POST /v1/changes``: deploys and other changes posted by CI, published on the bus (kind ``changes``).

Answers 201 ``{"ids": [...]}`` once the change log has stored every change of the request; 400 naming the
field for a body that is not one change object or a list of them (nothing of the request is stored); 413 for
more than 1000; 503 when the change log could not store them (nothing stored: send it again);
401/429/503/415 from the request guard.
"""

from __future__ import annotations

import hashlib

import orjson
from fastapi import APIRouter, Request
from fastapi.responses import JSONResponse
from pydantic import Field, ValidationError, field_validator

from sidecar.component import Context, Readiness
from sidecar.configbase import StrictModel
from sidecar.model import Batch, Change
from sidecar.timerange import check_unix_seconds

__all__ = ["ChangeIn", "ChangesEndpoint"]

ENDPOINT = "changes"
MAX_PER_REQUEST = 1000


class ChangeIn(StrictModel):
    """The body of ``POST /v1/changes`` (one object, or a list of them)."""

    what: str = Field(min_length=1, max_length=500, description="What changed (e.g. 'feature PR#221').")
    who: str = Field("", max_length=200, description="Who made the change.")
    at: float | None = Field(None, description="Unix seconds; default: when received.")
    model: str | None = Field(None, max_length=200, description="Model concerned; none: every model.")
    version: str | None = Field(None, max_length=100, description="Model version concerned.")
    link: str | None = Field(None, max_length=2000, description="A link, e.g. the pull request.")
    id: str | None = Field(
        None, max_length=200, description="Idempotency key; default: derived from the fields."
    )

    @field_validator("at")
    @classmethod
    def _at_in_range(cls, v: float | None) -> float | None:
        if v is not None and (why := check_unix_seconds(v)) is not None:
            raise ValueError(why)
        return v


class ChangesEndpoint:
    name = "changes_http"
    role = "source"

    def __init__(self, ctx: Context) -> None:
        self.ctx = ctx

    async def start(self) -> None:
        return None

    async def shutdown(self) -> None:
        return None

    def readiness(self) -> Readiness | None:
        return None

    def _parse(self, body: bytes) -> list[ChangeIn]:
        guard = self.ctx.guard
        try:
            data = orjson.loads(body)
        except orjson.JSONDecodeError as exc:
            raise guard.refuse(ENDPOINT, "bad_json", 400, f"body is not JSON: {exc}") from None
        items = data if isinstance(data, list) else [data]
        if len(items) > MAX_PER_REQUEST:
            raise guard.refuse(ENDPOINT, "too_many", 413, f"at most {MAX_PER_REQUEST} changes per request")
        parsed: list[ChangeIn] = []
        for i, item in enumerate(items):
            try:
                parsed.append(ChangeIn.model_validate(item))
            except ValidationError as exc:
                e = exc.errors()[0]
                where = ".".join(str(p) for p in e["loc"])
                prefix = f"[{i}]." if isinstance(data, list) else ""
                raise guard.refuse(ENDPOINT, "invalid", 400, f"{prefix}{where}: {e['msg']}") from None
        return parsed

    async def handle(self, request: Request) -> JSONResponse:
        guard = self.ctx.guard
        guard.authorize(request, "push", ENDPOINT)
        async with guard.admit(ENDPOINT):
            parsed = self._parse(await guard.read_body(request, ENDPOINT))
            now = self.ctx.clock.now()
            changes = [
                Change(what=c.what, who=c.who, at=c.at if c.at is not None else now, model=c.model,
                       version=c.version, link=c.link, source="api", id=c.id or "")
                for c in parsed
            ]
            changes = [c if c.id else _with_derived_id(c) for c in changes]
            if self.ctx.bus.publish(Batch(kind="changes", source="api", items=tuple(changes), received_at=now)):
                raise guard.refuse(ENDPOINT, "not_recorded", 503,
                                   "the change log could not store the changes (nothing was stored); retry",
                                   {"Retry-After": "5"})
        return JSONResponse(status_code=201, content={"ids": [c.id for c in changes]})

    def routes(self) -> APIRouter:
        router = APIRouter()

        @router.post("/v1/changes", status_code=201, tags=["changes"])
        async def post_changes(request: Request) -> JSONResponse:
            return await self.handle(request)

        return router


def _with_derived_id(c: Change) -> Change:
    raw = f"{c.what}|{c.who}|{c.at}|{c.model}|{c.version}|{c.link}"
    return Change(what=c.what, who=c.who, at=c.at, model=c.model, version=c.version, link=c.link,
                  source=c.source, id=hashlib.sha1(raw.encode()).hexdigest()[:20])

