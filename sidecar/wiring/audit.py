"""Builds the audit log: SQLite always, and Elasticsearch delivery (official client, replay queue in the
embedded store, dead-letter table) when configured."""

from __future__ import annotations

from exporters.audit import AuditLog
from exporters.audit_outbox import AuditOutbox, DeadLetters, EsDoc
from exporters.audit_retention import CLASSES, Budget
from exporters.elasticsearch import ClientFactory, ElasticsearchBulk, client_from_config
from exporters.sender import RetryPolicy, Sender
from exporters.telemetry import ExportTelemetry
from sidecar.component import Context
from sidecar.processors.request_records import RequestRecords
from sidecar.redact import mask_url
from sidecar.wiring.event_subs import subscribe_events
from sidecar.wiring.span_subs import subscribe_spans

__all__ = ["build", "build_requests"]

# The replay queue is on disk and may have been filled by an earlier run: look at it now and then.
_IDLE_WAKE_SECS = 5.0


def build(ctx: Context, *, es_client: ClientFactory = client_from_config) -> AuditLog | None:
    """``es_client`` makes the Elasticsearch client (the official one: exporters/elasticsearch.py says why it
    is not the shared httpx client)."""
    cfg = ctx.config.alerting.audit
    if not cfg.enabled:
        return None
    log = ctx.logger.getChild("alerting")
    es: Sender[EsDoc] | None = None
    outbox = dead = None
    index = "sidecar-audit"
    if cfg.elasticsearch is not None:
        ec = cfg.elasticsearch
        index = ec.index
        outbox = AuditOutbox(ctx.store, max_rows=ec.max_queue, overflow=ec.overflow)
        dead = DeadLetters(ctx.store, max_rows=ec.max_dead_letters, registry=ctx.registry)
        bulk = ElasticsearchBulk(
            ec,
            client=es_client(ec),
            dead_letters=dead,
            registry=ctx.registry,
            clock=ctx.clock,
            logger=log.getChild("elasticsearch"),
        )
        es = Sender(
            f"Elasticsearch {mask_url(ec.url)}",
            bulk.send,
            policy=RetryPolicy(**ec.retry.model_dump()),
            queue=outbox,
            max_batch=ec.max_batch,
            stats=ExportTelemetry.of(ctx.registry).exporter("elasticsearch"),
            close=bulk.aclose,
            clock=ctx.clock,
            idle_wake_secs=_IDLE_WAKE_SECS,
            logger=log.getChild("elasticsearch"),
        )
    return AuditLog(
        budgets={
            cls: Budget(max_rows=b.max_rows, max_bytes=b.max_bytes)
            for cls, b in ((c, getattr(cfg.retention, c)) for c in CLASSES)
        },
        retention_days=cfg.retention_days,
        registry=ctx.registry,
        store=ctx.store,
        es=es,
        outbox=outbox,
        dead_letters=dead,
        es_index=index,
        clock=ctx.clock,
        logger=log.getChild("audit"),
    )


def build_requests(ctx: Context, audit: AuditLog | None) -> list[RequestRecords]:
    """The request-record join, fed by the bus (Triton's spans, the caller's spans and events), writing to
    the audit log."""
    cfg = ctx.config.alerting.audit.requests
    if audit is None or not cfg.enabled:
        return []
    rr = RequestRecords(
        cfg,
        sink=audit.record_many,
        registry=ctx.registry,
        clock=ctx.clock,
        logger=ctx.logger.getChild("request_records"),
    )
    subscribe_spans(ctx.bus, rr.name, rr.on_spans, requests=rr.on_span_requests)
    subscribe_events(ctx.bus, rr.name, rr.on_events)
    return [rr]
