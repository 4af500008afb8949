"""``/audit``: the audit trail (alerts, changes, per-request records) read from ``GET /v1/audit``, filtered by
trace id, request id, model, version and kind, a page at a time (the API's cursor). Linked from the trace
waterfall (``/audit?trace_id=...``) and from alert annotations."""

from __future__ import annotations

from fastapi import APIRouter, Request
from fastapi.responses import HTMLResponse

from sidecar.clock import Clock
from sidecar.component import Passive
from sidecar.pages.readers import Api
from sidecar.pages.render import render

__all__ = ["AuditPage"]

_PASSED = ("trace_id", "request_id", "model", "version", "kind", "since", "until", "limit", "cursor")


class AuditPage(Passive):
    name = "audit_page"
    role = "sink"

    def __init__(self, clock: Clock, api: Api) -> None:
        self.clock = clock
        self.api = api

    async def page(self, request: Request) -> HTMLResponse:
        # Only the API's own parameters go on, each once; the API checks their values (and answers 400).
        params: dict[str, str | int] = {
            k: request.query_params[k][:600] for k in _PASSED if request.query_params.get(k)
        }
        raw, why = await self.api.get(request, "/v1/audit", params)
        events = [e for e in raw.get("events", []) if isinstance(e, dict)] if isinstance(raw, dict) else []
        cursor = raw.get("next_cursor") if isinstance(raw, dict) else None
        nxt = None
        if isinstance(cursor, str):
            nxt = {**{k: str(v) for k, v in params.items() if k != "cursor"}, "cursor": cursor}
        return HTMLResponse(
            render(
                "audit.html",
                now=self.clock.now(),
                events=events,
                why=why,
                filters={k: str(params.get(k, "")) for k in _PASSED if k != "cursor"},
                next_params=nxt,
            )
        )

    def routes(self) -> APIRouter:
        r = APIRouter()
        r.add_api_route("/audit", self.page, methods=["GET"], response_class=HTMLResponse, tags=["pages"])
        return r
