"""``/changes``: the change timeline (deploys, model loads and unloads, reference changes) with who, what,
where from, and which of the alert book's alerts cite each change."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from fastapi import APIRouter, Query, Request
from fastapi.responses import HTMLResponse

from sidecar.clock import Clock
from sidecar.component import Passive, Role
from sidecar.pages.audit_rows import subject
from sidecar.pages.readers import MAX_ROWS, Api
from sidecar.pages.render import render
from sidecar.pages.status import AlertView, alert_views

__all__ = ["ChangesPage", "Cited", "cited_by", "citing"]

_SOURCES = {"api": "POST /v1/changes", "triton_repository": "Triton repository poll", "config": "config"}


_RANK = {"firing": 0, "pending": 1, "resolved": 2}


@dataclass(frozen=True)
class Cited:
    """One alert citing a change, named so two alerts of one name tell apart: ``FeatureDrifting · fraud v2 ·
    amount`` (name, model and version, feature)."""

    text: str
    state: str


def cited_by(alerts: list[AlertView]) -> list[Cited]:
    """The citing alerts by name, model, version and feature, each once (the most pressing state where the
    same text is in the book twice, firing first), in the order given."""
    out: dict[str, Cited] = {}
    for a in alerts:
        parts = [a.name, subject(a.labels.get("model", ""), a.labels.get("version", "")), a.labels.get("feature", "")]
        text = " · ".join(p for p in parts if p)
        seen = out.get(text)
        if seen is None or _RANK.get(a.state, 3) < _RANK.get(seen.state, 3):
            out[text] = Cited(text, a.state)
    return list(out.values())


def citing(change: dict[str, Any], alerts: list[AlertView]) -> list[AlertView]:
    """The alerts whose annotations name this change. The alert book writes a change into the summary and
    description by its text (``what``), so that is what is matched; a change of another model is not cited
    by an alert that carries a model label."""
    what = str(change.get("what") or "")
    if not what:
        return []
    model = change.get("model")
    out = []
    for a in alerts:
        if model and a.labels.get("model") not in (None, model):
            continue
        if any(what in v for k, v in a.annotations.items() if k in ("summary", "description")):
            out.append(a)
    return out


class ChangesPage(Passive):
    name = "changes_page"
    role = Role.SINK

    def __init__(self, *, clock: Clock, api: Api) -> None:
        self.clock = clock
        self.api = api

    async def page(self, request: Request, model: str = "", limit: int = Query(100, ge=1, le=MAX_ROWS)) -> HTMLResponse:
        params: dict[str, str | int] = {"limit": limit}
        if model:
            params["model"] = model
        raw, why = await self.api.get(request, "/v1/changes", params)
        alerts_raw, alerts_why = await self.api.get(request, "/v1/alerts")
        alerts = alert_views(alerts_raw)
        changes = [c for c in raw if isinstance(c, dict)] if isinstance(raw, list) else []
        rows = [
            (
                c,
                _SOURCES.get(str(c.get("source", "")), str(c.get("source", ""))),
                cited_by(citing(c, alerts)),
                subject(str(c.get("model") or "all models"), str(c.get("version") or "")),
            )
            for c in changes
        ]
        return HTMLResponse(
            render(
                "changes.html",
                now=self.clock.now(),
                rows=rows,
                why=why,
                alerts_why=alerts_why,
                model=model,
                limit=limit,
            )
        )

    def routes(self) -> APIRouter:
        r = APIRouter()
        r.add_api_route("/changes", self.page, methods=["GET"], response_class=HTMLResponse, tags=["pages"])
        return r
