"""``/drift``: every monitored feature with its test, statistic, adjusted p, effect size, sample counts,
missing and unseen ratios, and whether its drift condition holds now and has held long enough to alert."""

from __future__ import annotations

from fastapi import APIRouter
from fastapi.responses import HTMLResponse
from prometheus_client import CollectorRegistry

from sidecar.clock import Clock
from sidecar.component import Readiness
from sidecar.pages.readers import read_metrics
from sidecar.pages.render import render

__all__ = ["DriftPage"]


class DriftPage:
    name = "drift_page"
    role = "sink"

    def __init__(self, registry: CollectorRegistry, clock: Clock) -> None:
        self.registry = registry
        self.clock = clock

    async def page(self, model: str = "") -> HTMLResponse:
        rows = [d for d in read_metrics(self.registry).drift if not model or d["model"] == model]
        return HTMLResponse(render("drift.html", now=self.clock.now(), rows=rows, model=model))

    def routes(self) -> APIRouter:
        r = APIRouter()
        r.add_api_route("/drift", self.page, methods=["GET"], response_class=HTMLResponse, include_in_schema=False)
        return r

    async def start(self) -> None:
        return None

    async def shutdown(self) -> None:
        return None

    def readiness(self) -> Readiness | None:
        return None
