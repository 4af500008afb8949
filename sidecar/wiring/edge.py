"""Builds the edge side from ``edge``: the processor, the checks that read it, the purge watch (subscribed to
changes), and the sources (``POST /v1/edge``, file tailers) that hand each read's records to the processor and
the purge watch."""

from __future__ import annotations

from typing import Any

from sidecar.checks.edge.purge import PurgeWatch
from sidecar.checks.edge.sla import HitRatioSla
from sidecar.checks.edge.tail import TailLatency
from sidecar.component import Context
from sidecar.processors.edge import EdgeProcessor
from sidecar.processors.edge_record import EdgeSink
from sidecar.sources.edge.metrics import EdgeSourceMetrics

__all__ = ["build"]


def build(ctx: Context) -> list[Any]:
    cfg = ctx.config.edge
    if not cfg.enabled:
        return []
    processor = EdgeProcessor(cfg.series, registry=ctx.registry, clock=ctx.clock)
    out: list[Any] = [processor]
    sinks: list[EdgeSink] = [processor]
    checks = cfg.checks
    if checks.sla.enabled:
        out.append(HitRatioSla(checks.sla, series=processor, registry=ctx.registry))
    if checks.tail.enabled:
        out.append(TailLatency(checks.tail, series=processor, registry=ctx.registry))
    if checks.purges.enabled:
        purges = PurgeWatch(checks.purges, hit_statuses=cfg.series.hit_statuses, registry=ctx.registry)
        ctx.bus.subscribe("changes", purges.name, purges.on_changes)
        out.append(purges)
        sinks.append(purges)
    metrics = EdgeSourceMetrics(ctx.registry)
    if cfg.source.http:
        from sidecar.sources.edge.http import EdgeEndpoint

        out.append(EdgeEndpoint(cfg.source, metrics=metrics, sinks=sinks, guard=ctx.guard, clock=ctx.clock))
    if cfg.source.files:
        from sidecar.sources.edge.jsonl import EdgeTailer

        out.extend(
            EdgeTailer(
                f,
                source_cfg=cfg.source,
                metrics=metrics,
                sinks=sinks,
                clock=ctx.clock,
                store=ctx.store,
                registry=ctx.registry,
                logger=ctx.logger.getChild(f"edge_file_{i}"),
                index=i,
            )
            for i, f in enumerate(cfg.source.files)
        )
    return out
