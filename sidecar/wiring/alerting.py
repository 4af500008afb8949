"""Builds alerting: the audit log, Alertmanager delivery, the change log (wiring/changes.py) and the alert book."""

from __future__ import annotations

from typing import Any

from exporters.alertmanager import AlertmanagerExporter
from exporters.audit import AuditLog
from exporters.elasticsearch import AuditDoc, ElasticsearchBulk
from exporters.sender import MemoryQueue, RetryPolicy, Sender
from exporters.telemetry import ExportTelemetry
from sidecar.alerting.book import Alert, AlertBook
from sidecar.alerting.runbook_pages import RunbookPages
from sidecar.component import Context
from sidecar.naming import fingerprint
from sidecar.redact import mask_url
from sidecar.state.changes import iso
from sidecar.wiring.changes import build as build_changes

__all__ = ["build"]


def build(ctx: Context) -> list[Any]:
    cfg = ctx.config.alerting
    if not cfg.enabled:
        return []
    log = ctx.logger.getChild("alerting")
    out: list[Any] = []
    audit: AuditLog | None = None
    if cfg.audit.enabled:
        es: Sender[AuditDoc] | None = None
        if cfg.audit.elasticsearch is not None:
            ec = cfg.audit.elasticsearch
            bulk = ElasticsearchBulk(
                ec,
                http=ctx.http,
                registry=ctx.registry,
                clock=ctx.clock,
                logger=log.getChild("elasticsearch"),
            )
            es = Sender(
                f"Elasticsearch {mask_url(ec.url)}",
                bulk.send,
                policy=RetryPolicy(**ec.retry.model_dump()),
                queue=MemoryQueue(ec.max_queue),
                max_batch=ec.max_batch,
                stats=ExportTelemetry.of(ctx.registry).exporter("elasticsearch"),
                close=bulk.aclose,
                clock=ctx.clock,
                logger=log.getChild("elasticsearch"),
            )
        audit = AuditLog(
            max_rows=cfg.audit.max_rows,
            registry=ctx.registry,
            store=ctx.store,
            es=es,
            logger=log.getChild("audit"),
        )
        out.append(audit)
    am = AlertmanagerExporter(
        cfg.alertmanager,
        registry=ctx.registry,
        clock=ctx.clock,
        store=ctx.store,
        http=ctx.http,
        logger=log.getChild("alertmanager"),
    )
    out.append(am)
    changes, components = build_changes(ctx, audit)
    out.extend(components)

    def on_transition(what: str, alert: Alert, now: float) -> None:
        if audit is not None:
            # Deterministic id (labels + when it became active), so a replay never duplicates in Elasticsearch.
            audit.record(
                f"alert_{what}",
                f"{what}-{fingerprint(alert.labels)}-{int(alert.active_at * 1000)}",
                now,
                {"labels": alert.labels, "annotations": alert.annotations, "at_iso": iso(now)},
            )

    srv = ctx.config.server
    sidecar_url = (srv.public_url or f"http://{srv.host}:{srv.port}").rstrip("/")
    out.append(RunbookPages(registry=ctx.registry))
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
