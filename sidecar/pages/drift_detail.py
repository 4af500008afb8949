"""``/drift/{model}/{version}/{feature}``: one feature's reference and current distributions drawn as an inline
SVG (server-side: no script, nothing from a CDN) so a person sees the shift, with the numbers of its test.

Numeric: both ECDFs, and the KS D as a vertical segment at the x where the curves lie furthest apart.
Categorical: reference and current share per category, new categories marked. The geometry is computed here;
the template only places it (every name in it is escaped by the one Jinja environment).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any
from urllib.parse import unquote

from fastapi import APIRouter, Request
from fastapi.responses import HTMLResponse

from sidecar.alerting.render.drift import evidence_text, now_text
from sidecar.clock import Clock
from sidecar.component import Passive, Role
from sidecar.pages.drift import DriftSource, detail_url
from sidecar.pages.render import render

__all__ = ["DriftDetailPage", "EcdfPlot"]

# Plot area inside the SVG (pixels).
WIDTH, HEIGHT, LEFT, TOP, PLOT_W, PLOT_H = 920, 380, 60, 16, 840, 310
BAR_H, BAR_GAP, LABEL_W, BARS_W = 9, 8, 220, 640
LABEL_CHARS = 32  # a longer category name is cut in the drawing (the full name is in its tooltip)


@dataclass(frozen=True)
class EcdfPlot:
    ref_path: str
    cur_path: str
    d: tuple[float, float, float, float]  # x1, y1, x2, y2 of the D segment (x1 == x2)
    x_ticks: list[tuple[float, str]]
    y_ticks: list[tuple[float, str]]


def _ecdf_plot(detail: Any) -> EcdfPlot:
    lo, hi = detail.x_range
    span = hi - lo

    def px(x: float) -> float:
        return LEFT + (min(max(x, lo), hi) - lo) / span * PLOT_W

    def py(f: float) -> float:
        return TOP + (1.0 - f) * PLOT_H

    def path(points: tuple[tuple[float, float], ...]) -> str:
        return " ".join(f"{px(x):.2f},{py(f):.2f}" for x, f in points)

    x, f_ref, f_cur = detail.d_at
    ticks = [lo + span * i / 5 for i in range(6)]
    return EcdfPlot(
        ref_path=path(detail.ref_points),
        cur_path=path(detail.cur_points),
        d=(px(x), py(f_ref), px(x), py(f_cur)),
        x_ticks=[(px(t), f"{t:.4g}") for t in ticks],
        y_ticks=[(py(f), f"{f:g}") for f in (0.0, 0.25, 0.5, 0.75, 1.0)],
    )


@dataclass(frozen=True)
class BarRow:
    y: float
    label: str
    full: str
    new: bool
    ref_w: float
    cur_w: float
    ref_share: float
    cur_share: float


def _bar_rows(detail: Any) -> tuple[list[BarRow], float, float]:
    """Rows of the categorical drawing, its height and the share at the full bar width."""
    top = max([max(b.ref_share, b.cur_share) for b in detail.bars] + [0.01])
    rows = []
    for i, b in enumerate(detail.bars):
        label = b.category if len(b.category) <= LABEL_CHARS else b.category[: LABEL_CHARS - 1] + "…"
        rows.append(
            BarRow(
                TOP + i * (2 * BAR_H + BAR_GAP),
                label,
                b.category,
                b.new,
                b.ref_share / top * BARS_W,
                b.cur_share / top * BARS_W,
                b.ref_share,
                b.cur_share,
            )
        )
    return rows, TOP + len(rows) * (2 * BAR_H + BAR_GAP) + 24, top


def _names(request: Request, rest: str) -> tuple[str, str, str] | None:
    """(model, version, feature) from the still-encoded path: the router sees ``%2F`` already decoded to ``/``,
    which would split a name with a slash in it (``detail_url`` quotes each name on its own)."""
    raw = request.scope.get("raw_path")
    if isinstance(raw, bytes | bytearray):
        path = bytes(raw).decode("latin-1").split("?", 1)[0]
        parts = path.split("/")[2:] if path.startswith("/drift/") else []
        return (unquote(parts[0]), unquote(parts[1]), unquote(parts[2])) if len(parts) == 3 else None
    parts = rest.split("/", 2)
    return (parts[0], parts[1], parts[2]) if len(parts) == 3 else None


class DriftDetailPage(Passive):
    name = "drift_detail_page"
    role = Role.SINK

    def __init__(self, *, clock: Clock, source: DriftSource | None) -> None:
        self.clock = clock
        self.source = source

    async def page(self, request: Request, rest: str) -> HTMLResponse:
        names = _names(request, rest)
        if names is None:
            return HTMLResponse(
                render(
                    "drift_detail.html",
                    now=self.clock.now(),
                    model="",
                    version="",
                    feature="",
                    missing="a drift page is /drift/{model}/{version}/{feature}, each name URL-encoded",
                ),
                status_code=404,
            )
        return self._page(*names)

    def _page(self, model: str, version: str, feature: str) -> HTMLResponse:
        now = self.clock.now()
        detail = self.source.detail(model, version, feature, now) if self.source is not None else None
        if detail is None:
            why = (
                "drift monitoring is not configured"
                if self.source is None
                else f"the drift check monitors no feature {feature!r} of model {model!r} version {version!r}"
            )
            return HTMLResponse(
                render("drift_detail.html", now=now, missing=why, model=model, version=version, feature=feature),
                status_code=404,
            )
        plot = _ecdf_plot(detail) if detail.d_at is not None and detail.x_range is not None else None
        bars, bars_h, bars_top = _bar_rows(detail) if detail.bars else ([], 0.0, 0.0)
        return HTMLResponse(
            render(
                "drift_detail.html",
                now=now,
                missing="",
                d=detail,
                r=detail.row,
                plot=plot,
                bars=bars,
                bars_h=bars_h,
                bars_top=bars_top,
                self_url=detail_url(model, version, feature),
                evidence_text=evidence_text,
                now_text=now_text,
                geo={
                    "W": WIDTH,
                    "H": HEIGHT,
                    "L": LEFT,
                    "T": TOP,
                    "PW": PLOT_W,
                    "PH": PLOT_H,
                    "BH": BAR_H,
                    "LW": LABEL_W,
                    "BW": BARS_W,
                },
            )
        )

    def routes(self) -> APIRouter:
        r = APIRouter()
        r.add_api_route("/drift/{rest:path}", self.page, methods=["GET"], response_class=HTMLResponse, tags=["pages"])
        return r
