"""``/audit``: the audit trail (alerts, changes, per-request records) read from ``GET /v1/audit``, filtered by
trace id, request id, model, version and kind, a page at a time (the API's cursor). Linked from the trace
waterfall (``/audit?trace_id=...``) and from alert annotations.

Each event is one row (``sidecar.pages.audit_rows``): model and version, an outcome for every kind and the
kind's details. Filtered by a trace that has no event, the page says why there may be none (per-request
records off, or not kept: only failed, slow and sampled requests are, once both sides arrived or the join
window passed)."""

from __future__ import annotations

from fastapi import APIRouter, Request
from fastapi.responses import HTMLResponse

from sidecar.clock import Clock
from sidecar.component import Passive, Role
from sidecar.pages.audit_rows import audit_row
from sidecar.pages.readers import Api
from sidecar.pages.render import render
from sidecar.processors.request_records_config import RequestRecordsConfig

__all__ = ["AuditPage"]

_PASSED = ("trace_id", "request_id", "model", "version", "kind", "since", "until", "limit", "cursor")


class AuditPage(Passive):
    name = "audit_page"
    role = Role.SINK

    def __init__(self, *, clock: Clock, api: Api, requests: RequestRecordsConfig | None = None) -> None:
        self.clock = clock
        self.api = api
        self.requests = requests

    def _empty_trace(self) -> str:
        """Why a trace may have no audit event: said from the per-request records' config."""
        r = self.requests
        if r is None or not r.enabled:
            return (
                "Per-request records are off (alerting.audit.requests.enabled), so a trace has audit events only "
                "when a finding or alert names it."
            )
        return (
            f"Per-request records keep failed requests, requests slower than {r.slow_ms:g} ms and "
            f"{r.sample_rate:.0%} of the rest, each written once the caller's and Triton's side both arrived "
            f"or {r.join_window_secs:g} s after the first (a trace not kept has no record)."
        )

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
                rows=[audit_row(e) for e in events],
                empty_trace=self._empty_trace(),
                why=why,
                filters={k: str(params.get(k, "")) for k in _PASSED if k != "cursor"},
                next_params=nxt,
            )
        )

    def routes(self) -> APIRouter:
        r = APIRouter()
        r.add_api_route("/audit", self.page, methods=["GET"], response_class=HTMLResponse, tags=["pages"])
        return r
