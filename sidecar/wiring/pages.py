"""Builds the status pages (``/``, ``/alerts``, ``/changes``, ``/drift``, ``/drift/{model}/{version}/{feature}``).

The status, alerts and changes pages read the registry and the sidecar's own read API, so they work with any
subset of areas configured. The drift pages read the drift check through a read-only view handed in here:
``factories()`` returns the drift builder and a pages builder that shares the check the first one built (no
lookup by name).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from sidecar.alerting.render.drift import blocks_text, reason_text
from sidecar.checks.drift.check import DriftCheck
from sidecar.checks.drift.view import DriftView
from sidecar.component import Context
from sidecar.pages.audit import AuditPage
from sidecar.pages.changes import ChangesPage
from sidecar.pages.drift import DriftPage
from sidecar.pages.drift_detail import DriftDetailPage
from sidecar.pages.readers import Api
from sidecar.pages.status import StatusPages
from sidecar.wiring.drift import build as build_drift

__all__ = ["build", "factories"]


def build(ctx: Context, drift: DriftCheck | None = None) -> list[Any]:
    log = ctx.logger.getChild("pages")
    api = Api(ctx.registry, log)
    view = DriftView(drift, reason_words=reason_text, blocks_words=blocks_text) if drift is not None else None
    # No base configured: the sidecar serves docs/runbooks itself at /runbooks (so links work offline).
    return [
        StatusPages(
            registry=ctx.registry,
            clock=ctx.clock,
            api=api,
            runbook_url=ctx.config.runbook_url or "/runbooks",
            logger=log,
        ),
        ChangesPage(clock=ctx.clock, api=api),
        AuditPage(clock=ctx.clock, api=api, requests=ctx.config.alerting.audit.requests),
        DriftPage(clock=ctx.clock, api=api, source=view, eval_interval_secs=ctx.config.checks.eval_interval_secs),
        DriftDetailPage(clock=ctx.clock, source=view),
    ]


Factory = Callable[[Context], list[Any]]


def factories() -> tuple[Factory, Factory]:
    """(drift builder, pages builder): the second hands the check the first built (if any) to the drift pages.
    One pair per Service: each pair holds the check of one build."""
    built: list[DriftCheck] = []

    def drift(ctx: Context) -> list[Any]:
        out = build_drift(ctx)
        built[:] = [c for c in out if isinstance(c, DriftCheck)]
        return out

    def pages(ctx: Context) -> list[Any]:
        return build(ctx, built[0] if built else None)

    return drift, pages
