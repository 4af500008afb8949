"""``POST /v1/edge``: edge access-log lines pushed by a log shipper (one object, a list, ``{"lines": [...]}`` or
JSON Lines), partially accepted like ``POST /v1/events``.

Answers: 200 ``{"accepted": n, "rejected": [...]}`` when at least one line was accepted (rejected ones listed with
their index and field); 400 with the same body when none was; 400 for a body that is not JSON; 413 for more than
``edge.source.max_lines_per_request`` lines or too many bytes; 415 for another Content-Type; 401/429/503 from the
request guard.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from fastapi import APIRouter, Request
from fastapi.responses import JSONResponse

from sidecar.clock import Clock
from sidecar.component import Passive, Role
from sidecar.httpguard import RequestGuard
from sidecar.processors.edge_record import EdgeRecord, EdgeSink
from sidecar.sources.edge.config import EdgeSourceConfig
from sidecar.sources.edge.metrics import EdgeSourceMetrics
from sidecar.sources.edge.parse import EdgeParser, EventError
from sidecar.sources.media import JSON, JSON_LINES, decode_documents, media_type

__all__ = ["EdgeEndpoint"]

ENDPOINT = "/v1/edge"
SOURCE = "http"


class EdgeEndpoint(Passive):
    name = "edge_http"
    role = Role.SOURCE

    def __init__(
        self,
        cfg: EdgeSourceConfig,
        *,
        metrics: EdgeSourceMetrics,
        sinks: Sequence[EdgeSink],
        guard: RequestGuard,
        clock: Clock,
    ) -> None:
        self.cfg = cfg
        self.m = metrics
        self.sinks = tuple(sinks)
        self.guard = guard
        self.clock = clock
        self.parser = EdgeParser(cfg)

    def _decode(self, body: bytes, mtype: str) -> list[Any]:
        return decode_documents(
            body, mtype, wrapper="lines", max_docs=self.cfg.max_lines_per_request, what="a log-line object"
        )

    async def handle(self, request: Request) -> JSONResponse:
        guard = self.guard
        guard.authorize(request, "push", ENDPOINT)
        mtype = media_type(request, JSON + JSON_LINES, guard, ENDPOINT)
        async with guard.admit(ENDPOINT):
            body = await guard.read_body(request, ENDPOINT)
            try:
                docs = self._decode(body, mtype)
            except ValueError as exc:
                self.m.rejected.labels(SOURCE, "not_json").inc()
                raise guard.refuse(ENDPOINT, "bad_request", 400, str(exc)) from None
            limit = self.cfg.max_lines_per_request
            if len(docs) > limit:
                self.m.rejected.labels(SOURCE, "too_many").inc(len(docs))
                raise guard.refuse(ENDPOINT, "too_large", 413, f"more than {limit} lines in one request")
            now = self.clock.now()
            records: list[EdgeRecord] = []
            rejected: list[dict[str, object]] = []
            for i, doc in enumerate(docs):
                try:
                    records.append(self.parser.parse(doc, f"lines[{i}]", now))
                except EventError as exc:
                    rejected.append({"index": i, "field": exc.field, "error": exc.message})
            if records:
                for sink in self.sinks:
                    sink.observe(records)
                self.m.received.labels(SOURCE).inc(len(records))
            if rejected:
                self.m.rejected.labels(SOURCE, "invalid").inc(len(rejected))
            content: dict[str, Any] = {
                "accepted": len(records),
                "rejected_count": len(rejected),
                "rejected": rejected[: self.cfg.max_rejections_listed],
            }
            if rejected:
                first = rejected[0]
                more = f" (and {len(rejected) - 1} more rejected)" if len(rejected) > 1 else ""
                content["error"] = f"{first['field']}: {first['error']}{more}"
            if rejected and not records:
                guard.refused.labels(ENDPOINT, "invalid").inc()
                return JSONResponse(status_code=400, content=content)
            return JSONResponse(status_code=200, content=content)

    def routes(self) -> APIRouter | None:
        router = APIRouter()

        @router.post(
            ENDPOINT,
            tags=["edge"],
            summary="Push edge (CDN) access-log lines",
            description="Edge access-log lines mapped by `edge.source.fields`; 200 lists what was accepted and, "
            "per index and field, what was rejected; 400 when nothing was usable.",
        )
        async def post_edge(request: Request) -> JSONResponse:
            return await self.handle(request)

        return router
