"""``/drift``: every monitored feature with its test, statistic, adjusted p, effect and its floor, how long the
condition has held, the reference (kind and age), missing ratios, and its state, worst first; links to each
feature's detail page and to its alert when one is pending or firing.

The numbers are the drift check's own, from a read-only view wiring hands in (``DriftSource``); without a
drift check the page says the check is not configured. Alerts come from the sidecar's own ``/v1/alerts``.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Protocol
from urllib.parse import quote

from fastapi import APIRouter, Request
from fastapi.responses import HTMLResponse

from sidecar.alerting.render.drift import evidence_text, now_text
from sidecar.clock import Clock
from sidecar.component import Passive, Role
from sidecar.model import Finding
from sidecar.pages.readers import Api
from sidecar.pages.render import render
from sidecar.pages.status import AlertView, alert_views

__all__ = ["DriftPage", "DriftSource", "detail_url", "drift_alerts"]


class DriftSource(Protocol):
    """What the drift pages read (``sidecar.checks.drift.view.DriftView``; pages never import a check)."""

    evaluated_at: float | None

    def record(self, findings: Sequence[Finding], now: float) -> None: ...

    def series(self, model: str = "") -> Sequence[Any]: ...

    def models(self) -> list[str]: ...

    def detail(self, model: str, version: str, feature: str, now: float) -> Any | None: ...


def detail_url(model: str, version: str, feature: str) -> str:
    """Each name quoted on its own (a ``/`` or ``?`` in a name stays inside its path segment)."""
    return "/drift/" + "/".join(quote(s, safe="") for s in (model, version, feature))


def drift_alerts(raw: object) -> dict[tuple[str, str, str], list[AlertView]]:
    """Pending and firing alerts by (model, version, feature)."""
    out: dict[tuple[str, str, str], list[AlertView]] = {}
    for a in alert_views(raw):
        if a.state in ("firing", "pending") and a.labels.get("feature"):
            key = (a.labels.get("model", ""), a.labels.get("version", ""), a.labels["feature"])
            out.setdefault(key, []).append(a)
    return out


class DriftPage(Passive):
    name = "drift_page"
    role = Role.SINK

    def __init__(self, *, clock: Clock, api: Api, source: DriftSource | None, eval_interval_secs: float = 30.0) -> None:
        self.clock = clock
        self.api = api
        self.source = source
        self.eval_interval_secs = eval_interval_secs

    def on_findings(self, findings: Sequence[Finding], now: float) -> None:
        if self.source is not None:
            self.source.record(findings, now)

    async def page(self, request: Request, model: str = "") -> HTMLResponse:
        now = self.clock.now()
        src = self.source
        raw, alerts_why = await self.api.get(request, "/v1/alerts")
        rows = list(src.series(model)) if src is not None else []
        at = src.evaluated_at if src is not None else None
        return HTMLResponse(
            render(
                "drift.html",
                now=now,
                rows=rows,
                model=model,
                configured=src is not None,
                models=src.models() if src is not None else [],
                evaluated_at=at,
                stale=at is not None and now - at > 3 * self.eval_interval_secs,
                alerts=drift_alerts(raw),
                alerts_why=alerts_why,
                detail_url=detail_url,
                evidence_text=evidence_text,
                now_text=now_text,
            )
        )

    def routes(self) -> APIRouter:
        r = APIRouter()
        r.add_api_route("/drift", self.page, methods=["GET"], response_class=HTMLResponse, tags=["pages"])
        return r
