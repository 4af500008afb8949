"""Builds alerting: the audit log (wiring/audit.py), Alertmanager delivery, the change log (wiring/changes.py)
and the alert book."""

from __future__ import annotations

from typing import Any

from exporters.alertmanager import AlertmanagerExporter
from exporters.audit_findings import FindingAudit
from exporters.elasticsearch import ClientFactory, client_from_config
from sidecar.alerting.book import AlertBook
from sidecar.alerting.runbook_pages import RunbookPages
from sidecar.component import Context
from sidecar.pages.render import render
from sidecar.wiring.alert_audit import delivery_recorder, transition_recorder
from sidecar.wiring.audit import build as build_audit
from sidecar.wiring.audit import build_requests
from sidecar.wiring.changes import build as build_changes

__all__ = ["build"]


def build(ctx: Context, *, es_client: ClientFactory = client_from_config) -> list[Any]:
    cfg = ctx.config.alerting
    if not cfg.enabled:
        return []
    log = ctx.logger.getChild("alerting")
    out: list[Any] = []
    audit = build_audit(ctx, es_client=es_client)
    if audit is not None:
        out.append(audit)
    out.extend(build_requests(ctx, audit))
    if audit is not None:
        out.append(FindingAudit(audit, registry=ctx.registry, logger=ctx.logger.getChild("audit")))
    am = AlertmanagerExporter(
        cfg.alertmanager,
        registry=ctx.registry,
        clock=ctx.clock,
        store=ctx.store,
        http=ctx.http,
        logger=log.getChild("alertmanager"),
        on_outcome=delivery_recorder(audit) if audit is not None else None,
    )
    out.append(am)
    changes, components = build_changes(ctx, audit)
    out.extend(components)

    on_transition = (
        transition_recorder(audit, cfg.audit.resent_every_secs, cfg.max_active_alerts) if audit is not None else None
    )
    srv = ctx.config.server
    sidecar_url = (srv.public_url or f"http://{srv.host}:{srv.port}").rstrip("/")
    out.append(RunbookPages(ctx.config, registry=ctx.registry, render=render))
    book = AlertBook(
        cfg,
        registry=ctx.registry,
        monotonic=ctx.clock.monotonic,
        eval_interval_secs=ctx.config.checks.eval_interval_secs,
        sink=am,
        recent_changes=changes.recent,
        # No base configured: the sidecar's own copy, so the link works offline.
        runbook_base=ctx.config.runbook_url or f"{sidecar_url}/runbooks",
        dashboard_base=ctx.config.dashboard_url,
        sidecar_url=sidecar_url,
        logger=log.getChild("book"),
        on_transition=on_transition,
        store=ctx.store,
    )
    out.append(book)
    return out
