"""``/`` (status at a glance) and ``/alerts`` (active, pending and recently resolved alerts, and delivery to
each Alertmanager). Both read the sidecar's public surfaces (``sidecar.pages.readers``), so they show any
component that serves them and break none that is absent: an unconfigured area says so."""

from __future__ import annotations

import datetime as dt
import logging
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlencode

from fastapi import APIRouter, Request
from fastapi.responses import HTMLResponse
from prometheus_client import CollectorRegistry

from sidecar.alerting.render.drift import figures_text
from sidecar.clock import Clock
from sidecar.component import Passive, Role
from sidecar.delivery_state import STATES as DELIVERY_WORDS
from sidecar.pages.edge_line import edge_line
from sidecar.pages.goodput_line import goodput_line
from sidecar.pages.probe_line import probe_line
from sidecar.pages.readers import MAX_ROWS, Api, read_metrics
from sidecar.pages.render import render, static_routes
from sidecar.pages.tokens_line import tokens_line
from sidecar.pages.verdicts_line import gpu_memory_line, verdict_line

__all__ = ["AlertView", "StatusPages", "alert_views", "verdicts"]

_ORDER = {"firing": 0, "pending": 1, "inactive": 2}


def _parse_iso(s: object) -> float | None:
    if not isinstance(s, str) or not s:
        return None
    try:
        return dt.datetime.fromisoformat(s.replace("Z", "+00:00")).timestamp()
    except ValueError:
        return None


@dataclass(frozen=True)
class AlertView:
    state: str  # firing | pending | resolved
    labels: dict[str, str]
    annotations: dict[str, str]
    since: float | None  # when it became active (startsAt)
    resolved_at: float | None

    @property
    def name(self) -> str:
        return self.labels.get("alertname", "(no alertname)")

    @property
    def links(self) -> list[tuple[str, str]]:
        """(text, href) of the annotations that are links, the trace first: what on-call opens next."""
        out = []
        for key, text in (("trace_url", "trace"), ("dashboard_url", "dashboard"), ("runbook_url", "runbook")):
            href = self.annotations.get(key, "")
            if href.startswith(("http://", "https://", "/")):  # never a javascript: or data: link
                out.append((text, href))
        if self.labels.get("feature"):
            out.append(("drift", f"/drift?{urlencode({'model': self.labels.get('model', '')})}"))
        return out


def alert_views(raw: object) -> list[AlertView]:
    """The book's JSON as views, firing first, each group newest first; malformed entries are skipped."""
    out = []
    for a in raw if isinstance(raw, list) else []:
        if not isinstance(a, dict):
            continue
        labels = {str(k): str(v) for k, v in (a.get("labels") or {}).items()}
        ann = {str(k): str(v) for k, v in (a.get("annotations") or {}).items()}
        state = str(a.get("state", ""))
        out.append(
            AlertView(
                "resolved" if state == "inactive" else state,
                labels,
                ann,
                _parse_iso(a.get("startsAt")),
                _parse_iso(a.get("endsAt")) if state == "inactive" else None,
            )
        )
    out.sort(key=lambda v: (_ORDER.get("inactive" if v.state == "resolved" else v.state, 3), -(v.since or 0)))
    return out[:MAX_ROWS]


def verdicts(registry: CollectorRegistry) -> list[dict[str, str]]:
    """One row per canary pair and per model version under output sanity, worst first, from their gauges."""
    rows: dict[tuple[str, ...], dict[str, Any]] = {}
    for family in registry.collect():
        for s in family.samples:
            lab = s.labels
            if s.name in ("sidecar_canary_verdict", "sidecar_canary_insufficient_data"):
                key: tuple[str, ...] = ("canary", lab["model"], lab["baseline"], lab["candidate"])
                row = rows.setdefault(
                    key,
                    {
                        "check": "canary",
                        "subject": f"{lab['model']} {lab['candidate']} vs {lab['baseline']}",
                        "bad": [],
                        "tested": False,
                    },
                )
                if s.name == "sidecar_canary_verdict":
                    row["tested"] = True
                    if s.value == 1:
                        row["bad"].append(lab["aspect"])
            elif s.name == "sidecar_output_sanity_condition":
                key = ("output", lab["model"], lab["version"])
                row = rows.setdefault(
                    key,
                    {
                        "check": "output sanity",
                        "subject": f"{lab['model']} {lab['version']}",
                        "bad": [],
                        "tested": True,
                    },
                )
                if s.value == 1:
                    row["bad"].append(lab["test"])
    out = []
    for key in sorted(rows):
        r = rows[key]
        state = (
            ("worse" if key[0] == "canary" else "suspect")
            if r["bad"]
            else ("ok" if r["tested"] else "insufficient data")
        )
        out.append({"check": r["check"], "subject": r["subject"], "state": state, "detail": ", ".join(r["bad"])})
    return sorted(out, key=lambda r: r["state"] not in ("worse", "suspect"))


class StatusPages(Passive):
    name = "status_pages"
    role = Role.SINK

    def __init__(
        self,
        *,
        registry: CollectorRegistry,
        clock: Clock,
        api: Api,
        runbook_url: str = "",
        logger: logging.Logger | None = None,
    ) -> None:
        self.registry = registry
        self.clock = clock
        self.api = api
        self.runbook_url = runbook_url
        self.log = logger or logging.getLogger("sidecar.pages")

    async def _alerts(self, request: Request) -> tuple[list[AlertView], str]:
        raw, why = await self.api.get(request, "/v1/alerts")
        return alert_views(raw), why

    async def index(self, request: Request) -> HTMLResponse:
        alerts, alerts_why = await self._alerts(request)
        ready, ready_why = await self.api.get(request, "/readyz")
        changes, changes_why = await self.api.get(request, "/v1/changes", {"limit": 10})
        m = read_metrics(self.registry)
        return HTMLResponse(
            render(
                "status.html",
                now=self.clock.now(),
                alerts=[a for a in alerts if a.state != "resolved"],
                resolved=sum(1 for a in alerts if a.state == "resolved"),
                alerts_why=alerts_why,
                ready=ready if isinstance(ready, dict) else None,
                ready_why=ready_why,
                changes=_changes(changes),
                changes_why=changes_why,
                m=m,
                drifting=[d for d in m.drift if d.get("drifting")],
                runbook_url=self.runbook_url,
                verdicts=verdicts(self.registry),
                verdict_line=verdict_line(self.registry),
                probe_line=probe_line(self.registry),
                gpu_memory_line=gpu_memory_line(self.registry),
                edge_line=edge_line(self.registry),
                goodput_line=goodput_line(self.registry),
                tokens_line=tokens_line(self.registry),
            )
        )

    async def alerts_page(self, request: Request) -> HTMLResponse:
        alerts, why = await self._alerts(request)
        m = read_metrics(self.registry)
        drift = {(d["model"], d["version"], d["feature"]): d for d in m.drift}
        return HTMLResponse(
            render(
                "alerts.html",
                now=self.clock.now(),
                alerts=alerts,
                why=why,
                deliveries=m.deliveries,
                delivery_words=DELIVERY_WORDS,
                drift=drift,
                figures_text=lambda *a, **kw: "now: " + figures_text(*a, **kw),
                groups=[(s, [a for a in alerts if a.state == s]) for s in ("firing", "pending", "resolved")],
            )
        )

    def routes(self) -> APIRouter:
        r = APIRouter()
        r.add_api_route("/", self.index, methods=["GET"], response_class=HTMLResponse, tags=["pages"])
        r.add_api_route("/alerts", self.alerts_page, methods=["GET"], response_class=HTMLResponse, tags=["pages"])
        r.include_router(static_routes())
        return r


def _changes(raw: Any) -> list[dict[str, Any]]:
    if not isinstance(raw, list):
        return []
    return [c for c in raw if isinstance(c, dict)][:MAX_ROWS]
