"""Builds the status pages (``/``, ``/alerts``, ``/changes``, ``/drift``). They read the registry and the sidecar's own
read API, so they need no other component handed in and work with any subset of areas configured."""

from __future__ import annotations

from typing import Any

from sidecar.component import Context
from sidecar.pages.audit import AuditPage
from sidecar.pages.changes import ChangesPage
from sidecar.pages.drift import DriftPage
from sidecar.pages.readers import Api
from sidecar.pages.status import StatusPages

__all__ = ["build"]


def build(ctx: Context) -> list[Any]:
    log = ctx.logger.getChild("pages")
    api = Api(ctx.registry, log)
    # No base configured: the sidecar serves docs/runbooks itself at /runbooks (so links work offline).
    return [StatusPages(ctx.registry, ctx.clock, api, runbook_url=ctx.config.runbook_url or "/runbooks", logger=log),
            ChangesPage(ctx.clock, api), AuditPage(ctx.clock, api), DriftPage(ctx.registry, ctx.clock)]
