"""``/traces`` (recent slow and failed traces, each with why it is marked failed) and ``/traces/{trace_id}``
(the waterfall, the trace's one state, a detail panel per span, the stage table and a legend).

No JavaScript: a bar links to its span's detail panel (an HTML ``<details>``), so the page stays fast with
hundreds of spans.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, replace

from fastapi import APIRouter, HTTPException
from fastapi.responses import HTMLResponse

from sidecar.component import Passive, Role
from sidecar.pages.render import render, static_routes
from sidecar.pages.waterfall import (
    EDGE_COLOR,
    ERROR_COLOR,
    ORIGIN_COLOR,
    PALETTE,
    layout,
    line_breaks,
    one_line,
    order_spans,
    stage_rows,
    trace_state,
)
from sidecar.processors.edge_record import EdgeRecord
from sidecar.processors.stages import STAGES
from sidecar.state.edge_hops import EdgeHops
from sidecar.state.trace_hub import TraceHub
from sidecar.state.traces import TraceEntry, TraceSummary

__all__ = ["ERROR_COLOR", "TracePages", "order_spans", "render_list", "render_trace"]

_TRACE_ID = re.compile(r"[0-9a-f]{32}")


def render_trace(e: TraceEntry, edge_hops: EdgeHops | None = None) -> str:
    spans = e.spans
    hop = None
    joined_by = "trace id"
    if edge_hops is not None and spans:
        hop = edge_hops.find(e.trace_id)
        if hop is None:
            hop = edge_hops.find_for_spans(e.trace_id, (s.attributes for s in spans))
            joined_by = "request id"
    return render(
        "trace.html",
        e=e,
        spans=spans,
        state=trace_state(e),
        wf=layout(spans, hop, joined_by) if spans else None,
        edge_color=EDGE_COLOR,
        origin_color=ORIGIN_COLOR,
        stages=stage_rows(e),
        stage_names=STAGES,
        error_color=ERROR_COLOR,
        palette=PALETTE,
        one_line=one_line,
        line_breaks=line_breaks,
    )


@dataclass(frozen=True)
class _Listed:
    t: TraceSummary
    state: str
    css: str
    why: str  # one line (wrapped by the page's CSS), at most WHY_CHARS
    why_all: str = ""  # the whole of it, for the tooltip, when ``why`` is cut
    edge: str = ""  # the edge hop joined to the trace: "node · CACHE", empty when none
    edge_title: str = ""

    @classmethod
    def of(cls, t: TraceSummary, state: str, css: str, reasons: list[str]) -> _Listed:
        if not reasons:
            return cls(t, state, css, "")
        more = f" (+{len(reasons) - 1} more)" if len(reasons) > 1 else ""
        first = one_line(reasons[0], 2000)
        why = one_line(first, WHY_CHARS) + more
        return cls(t, state, css, why, first + more if len(first) > WHY_CHARS else "")

    def with_hop(self, hop: EdgeRecord | None, joined_by: str) -> _Listed:
        if hop is None:
            return self
        cache = hop.cache or "no cache status"
        label = one_line(f"{hop.node} \u00b7 {cache}", 80)
        title = f"edge hop (joined by {joined_by}): {hop.node}, {cache}, {hop.path}"
        if hop.edge_s is not None:
            title += f", edge {hop.edge_s * 1000:.1f} ms"
        if hop.origin_s is not None:
            title += f", origin {hop.origin_s * 1000:.1f} ms"
        return replace(self, edge=label, edge_title=one_line(title, 400))


WHY_CHARS = 240


def _listed(hub: TraceHub, t: TraceSummary, edge_hops: EdgeHops | None = None) -> _Listed:
    e = hub.store.get(t.trace_id)
    if e is None:  # evicted between the summary and now: say what the summary knew
        state = "failed" if t.error else ("possibly failed" if t.failure_note else "ok")
        css = {"failed": "err", "possibly failed": "maybe"}.get(state, "")
        listed = _Listed.of(t, state, css, [t.failure_note] if t.failure_note else [])
        return listed.with_hop(edge_hops.find(t.trace_id), "trace id") if edge_hops is not None else listed
    st = trace_state(e)
    listed = _Listed.of(t, st.state, st.css, st.reasons)
    if edge_hops is None:
        return listed
    # The same join as the trace page's (render_trace): the trace id first, else a request id a span carries.
    if (hop := edge_hops.find(e.trace_id)) is not None:
        return listed.with_hop(hop, "trace id")
    return listed.with_hop(edge_hops.find_for_spans(e.trace_id, (s.attributes for s in e.spans)), "request id")


def render_list(
    hub: TraceHub, model: str | None, version: str | None, show_all: bool, edge_hops: EdgeHops | None = None
) -> str:
    items = hub.store.summaries(
        model=model or None, version=version or None, only_interesting=not show_all, limit=hub.cfg.list_limit
    )
    pairs = hub.store.models()
    return render(
        "trace_list.html",
        items=[_listed(hub, t, edge_hops) for t in items],
        show_edge=edge_hops is not None,
        held=len(hub.store),
        show_all=show_all,
        slow_ms=hub.cfg.slow_threshold_ms,
        model=model or "",
        version=version or "",
        models=sorted({p[0] for p in pairs}),
        versions=sorted({p[1] for p in pairs}),
    )


class TracePages(Passive):
    name = "trace_pages"
    role = Role.SINK

    def __init__(self, hub: TraceHub, *, edge_hops: EdgeHops | None = None) -> None:
        self.hub = hub
        self.edge_hops = edge_hops

    async def list_page(
        self, model: str | None = None, version: str | None = None, all: str | None = None
    ) -> HTMLResponse:
        return HTMLResponse(render_list(self.hub, model, version, bool(all), self.edge_hops))

    async def trace_page(self, trace_id: str) -> HTMLResponse:
        tid = trace_id.lower()
        if not _TRACE_ID.fullmatch(tid):
            raise HTTPException(400, "a trace id is 32 hex digits")
        e = self.hub.store.get(tid)
        if e is None:
            raise HTTPException(404, f"trace {tid} is not (or no longer) held by this sidecar")
        return HTMLResponse(render_trace(e, self.edge_hops))

    def routes(self) -> APIRouter:
        r = APIRouter()
        r.add_api_route("/traces", self.list_page, methods=["GET"], response_class=HTMLResponse, tags=["pages"])
        r.add_api_route(
            "/traces/{trace_id}",
            self.trace_page,
            methods=["GET"],
            response_class=HTMLResponse,
            tags=["pages"],
        )
        # The trace pages work without the status pages (a traces-only deployment), so they bring the CSS.
        r.include_router(static_routes())
        return r
