"""Server-rendered trace pages for on-call: ``/traces`` (recent slow and failed traces) and
``/traces/{trace_id}``.

The waterfall is one inline SVG: one row per span, ordered depth-first by parent and start time, bars on a
shared
time axis, names indented by depth, durations inline, Triton's events as ticks, error spans red and marked
with a
cross. No JavaScript and no external assets, so it loads fast with hundreds of spans.
"""

from __future__ import annotations

import datetime as dt
import html
import re
from collections.abc import Sequence

from fastapi import APIRouter, HTTPException
from fastapi.responses import HTMLResponse

from sidecar.component import Readiness
from sidecar.model import Span
from sidecar.processors.stages import STAGES, stage_durations
from sidecar.state.trace_hub import TraceHub
from sidecar.state.traces import MODEL_ATTR, TraceEntry

__all__ = ["TracePages", "order_spans", "render_list", "render_trace"]

_TRACE_ID = re.compile(r"[0-9a-f]{32}")
_PALETTE = ("#4c78a8", "#59a14f", "#9c755f", "#b07aa1", "#f28e2b", "#76b7b2")
ERROR_COLOR = "#d62728"
LABEL_W = 330
BAR_W = 820
ROW_H = 24
TOP = 34

_CSS = """
body{font:14px/1.4 system-ui,-apple-system,Segoe UI,Roboto,sans-serif;margin:16px 24px;color:#222}
h1{font-size:20px;margin:0 0 8px} a{color:#1f5fa8} table{border-collapse:collapse}
td,th{padding:3px 10px;border-bottom:1px solid #e4e4e4;text-align:left;white-space:nowrap}
th{background:#f4f4f4} .err{color:#d62728;font-weight:600} .slow{color:#b35c00;font-weight:600} .maybe{color:#8a6d00}
.meta{color:#555;margin-bottom:10px} .num{text-align:right;font-variant-numeric:tabular-nums}
svg text{font:12px system-ui,sans-serif} .note{background:#fff3f3;border-left:4px solid #d62728;padding:6px
10px}
"""


def _page(title: str, body: str) -> str:
    return (
        f"<!doctype html><html lang=en><head><meta charset=utf-8><title>{html.escape(title)}</title>"
        f"<meta name=viewport content='width=device-width,initial-scale=1'><style>{_CSS}</style></head>"
        f"<body>{body}</body></html>"
    )


def _ms(ns: int | float) -> str:
    ms = ns / 1e6
    if ms == 0:
        return "0 ms"
    return f"{ms:.3f} ms" if ms < 10 else f"{ms:.1f} ms"


def _when(ns: int) -> str:
    return dt.datetime.fromtimestamp(ns / 1e9, tz=dt.timezone.utc).strftime("%Y-%m-%d %H:%M:%S.%f")[:-3] + "Z"


def order_spans(spans: Sequence[Span]) -> list[tuple[Span, int]]:
    """Spans depth-first: each parent followed by its children by start time; orphans become roots."""
    ids = {s.span_id for s in spans}
    kids: dict[str | None, list[Span]] = {}
    for s in spans:
        parent = s.parent_span_id if s.parent_span_id in ids else None
        kids.setdefault(parent, []).append(s)
    for v in kids.values():
        v.sort(key=lambda s: (s.start_unix_nano, s.end_unix_nano))
    out: list[tuple[Span, int]] = []
    seen: set[str] = set()
    stack: list[tuple[Span, int]] = [(s, 0) for s in reversed(kids.get(None, []))]
    while stack:
        s, d = stack.pop()
        if s.span_id in seen:  # a duplicate span id must not loop
            continue
        seen.add(s.span_id)
        out.append((s, d))
        stack.extend((c, d + 1) for c in reversed(kids.get(s.span_id, [])))
    return out


def _nice_step(total_ns: float) -> float:
    raw = total_ns / 8
    mag = 10 ** (len(str(int(max(raw, 1)))) - 1)
    for m in (1, 2, 5, 10):
        if raw <= m * mag:
            return float(m * mag)
    return float(10 * mag)


def _color(s: Span) -> str:
    if s.is_error:
        return ERROR_COLOR
    return _PALETTE[sum(s.name.encode()) % len(_PALETTE)]


def render_waterfall(spans: Sequence[Span]) -> str:
    rows = order_spans(spans)
    t0 = min(s.start_unix_nano for s in spans)
    t1 = max(s.end_unix_nano for s in spans)
    total = max(1, t1 - t0)
    scale = BAR_W / total
    height = TOP + ROW_H * len(rows) + 8
    width = LABEL_W + BAR_W + 110
    parts = [
        f'<svg id=waterfall xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
        f'viewBox="0 0 {width} {height}" role=img aria-label="trace waterfall">'
    ]
    step = _nice_step(total)
    t = 0.0
    while t <= total:
        x = LABEL_W + t * scale
        parts.append(
            f'<line x1="{x:.1f}" y1="{TOP - 8}" x2="{x:.1f}" y2="{height}" stroke="#e6e6e6"/>'
            f'<text x="{x + 2:.1f}" y="{TOP - 12}" fill="#666">{_ms(t)}</text>'
        )
        t += step
    for i, (s, depth) in enumerate(rows):
        y = TOP + i * ROW_H
        if i % 2:
            parts.append(f'<rect x="0" y="{y}" width="{width}" height="{ROW_H}" fill="#fafafa"/>')
        x = LABEL_W + (s.start_unix_nano - t0) * scale
        w = max(1.0, s.duration_ns * scale)
        name = html.escape(s.name)
        mark = "\u2716 " if s.is_error else ""
        label_cls = ' class="err" fill="#d62728"' if s.is_error else ""
        model = s.attributes.get(MODEL_ATTR)
        extra = (
            f" v{html.escape(str(s.attributes.get('triton.model_version', '')))}" if model is not None else ""
        )
        parts.append(f'<text x="{6 + 14 * depth}" y="{y + 16}"{label_cls}>{mark}{name}{extra}</text>')
        tip = [f"{s.name}: {_ms(s.duration_ns)} (starts at +{_ms(s.start_unix_nano - t0)})"]
        if s.service_name:
            tip.append(f"service {s.service_name}")
        if s.is_error:
            tip.append(f"ERROR {s.status_message}".rstrip())
        tip += [f"{e.name} +{_ms(e.time_unix_nano - t0)}" for e in s.events]
        parts.append(
            f'<g class="span"><title>{html.escape(chr(10).join(tip))}</title>'
            f'<rect class="bar" data-span-id="{s.span_id}" data-start-ns="{s.start_unix_nano - t0}" '
            f'data-duration-ns="{s.duration_ns}" data-error="{int(s.is_error)}" x="{x:.2f}" y="{y + 4}" '
            f'width="{w:.2f}" height="{ROW_H - 8}" rx="2" fill="{_color(s)}"/>'
        )
        for e in s.events:
            ex = LABEL_W + (e.time_unix_nano - t0) * scale
            parts.append(
                f'<line x1="{ex:.2f}" y1="{y + 3}" x2="{ex:.2f}" y2="{y + ROW_H - 3}" '
                f'stroke="#222" stroke-opacity=".35"/>'
            )
        parts.append(f'<text x="{x + w + 4:.1f}" y="{y + 16}" fill="#333">{_ms(s.duration_ns)}</text></g>')
    parts.append("</svg>")
    return "".join(parts)


def _stage_table(e: TraceEntry) -> str:
    by_id = {s.span_id: s for s in e.spans}
    compute = {s.parent_span_id: s for s in e.spans if s.name == "compute" and s.parent_span_id}
    rows = []
    for s in e.spans:
        if MODEL_ATTR not in s.attributes:
            continue
        d = stage_durations(s, compute.get(s.span_id), by_id.get(s.parent_span_id or ""))
        cells = "".join(f"<td class=num>{_ms(d[k] * 1e9) if k in d else '-'}</td>" for k in STAGES)
        rows.append(
            f"<tr><td>{html.escape(str(s.attributes[MODEL_ATTR]))} "
            f"v{html.escape(str(s.attributes.get('triton.model_version', '')))}</td>{cells}</tr>"
        )
    if not rows:
        return ""
    head = "".join(f"<th>{k.replace('_', ' ')}</th>" for k in STAGES)
    return (
        f"<h2 style='font-size:16px'>Triton stages</h2><table><tr><th>model</th>{head}</tr>"
        f"{''.join(rows)}</table>"
    )


def render_trace(e: TraceEntry) -> str:
    spans = list(e.spans)
    errors = sum(1 for s in spans if s.is_error)
    status = (
        f"<span class=err>\u2716 {errors} error span(s)</span>"
        if errors
        else ("<span class=err>\u2716 failed</span>" if e.error else "ok")
    )
    note = f"<p class=note>{html.escape(e.failure_note)}</p>" if e.failure_note else ""
    model = f" &middot; model <b>{html.escape(e.model)}</b> v{html.escape(e.version)}" if e.model else ""
    body = (
        f"<p><a href='/traces'>&larr; recent traces</a></p><h1>Trace {e.trace_id}</h1>"
        f"<div class=meta>{_when(e.start_ns)} &middot; duration <b>{_ms(e.duration_ns)}</b> &middot; "
        f"{len(spans)} spans{model} &middot; {status}</div>{note}"
        f"{render_waterfall(spans) if spans else '<p>No spans.</p>'}{_stage_table(e)}"
    )
    return _page(f"Trace {e.trace_id}", body)


def render_list(hub: TraceHub, model: str | None, version: str | None, show_all: bool) -> str:
    items = hub.store.summaries(
        model=model or None, version=version or None, only_interesting=not show_all, limit=hub.cfg.list_limit
    )
    pairs = hub.store.models()
    opts_m = "".join(
        f"<option{' selected' if m == model else ''}>{html.escape(m)}</option>"
        for m in sorted({p[0] for p in pairs})
    )
    opts_v = "".join(
        f"<option{' selected' if v == version else ''}>{html.escape(v)}</option>"
        for v in sorted({p[1] for p in pairs})
    )
    form = (
        f"<form method=get>model <select name=model><option value=''>any</option>{opts_m}</select> "
        f"version <select name=version><option value=''>any</option>{opts_v}</select> "
        f"<label><input type=checkbox name=all value=1{' checked' if show_all else ''}> all traces</label> "
        f"<button>filter</button></form>"
    )
    rows = []
    for t in items:
        flags = []
        if t.error:
            flags.append("<span class=err>failed</span>")
        elif t.failure_note:
            # Only a counter says so, not this request: shown, but quieter than a certain failure.
            flags.append("<span class=maybe title='Triton counted failures of this model and version while this "
                         "request ran; which request failed is unknown'>possibly failed</span>")
        if t.slow:
            flags.append("<span class=slow>slow</span>")
        rows.append(
            f"<tr><td><a href='/traces/{t.trace_id}'>{t.trace_id[:16]}&hellip;</a></td>"
            f"<td>{_when(t.start_ns)}</td><td>{html.escape(t.root_name)}</td><td>{html.escape(t.model)}</td>"
            f"<td>{html.escape(t.version)}</td><td class=num>{_ms(t.duration_ns)}</td>"
            f"<td class=num>{t.span_count}</td><td>{' '.join(flags)}</td></tr>"
        )
    what = (
        "All recent traces"
        if show_all
        else (f"Recent slow (&ge; {hub.cfg.slow_threshold_ms:g} ms) and failed traces")
    )
    table = (
        "<table><tr><th>trace</th><th>start (UTC)</th><th>root span</th><th>model</th><th>version</th>"
        f"<th>duration</th><th>spans</th><th></th></tr>{''.join(rows)}</table>"
        if rows
        else "<p>No traces match.</p>"
    )
    return _page("Traces", f"<h1>{what}</h1><div class=meta>{len(hub.store)} traces held</div>{form}{table}")


class TracePages:
    name = "trace_pages"
    role = "sink"

    def __init__(self, hub: TraceHub) -> None:
        self.hub = hub

    async def list_page(
        self, model: str | None = None, version: str | None = None, all: str | None = None
    ) -> HTMLResponse:
        return HTMLResponse(render_list(self.hub, model, version, bool(all)))

    async def trace_page(self, trace_id: str) -> HTMLResponse:
        tid = trace_id.lower()
        if not _TRACE_ID.fullmatch(tid):
            raise HTTPException(400, "a trace id is 32 hex digits")
        e = self.hub.store.get(tid)
        if e is None:
            raise HTTPException(404, f"trace {tid} is not (or no longer) held by this sidecar")
        return HTMLResponse(render_trace(e))

    def routes(self) -> APIRouter:
        r = APIRouter()
        r.add_api_route(
            "/traces", self.list_page, methods=["GET"], response_class=HTMLResponse, include_in_schema=False
        )
        r.add_api_route(
            "/traces/{trace_id}",
            self.trace_page,
            methods=["GET"],
            response_class=HTMLResponse,
            include_in_schema=False,
        )
        return r

    async def start(self) -> None:
        return None

    async def shutdown(self) -> None:
        return None

    def readiness(self) -> Readiness | None:
        return None
