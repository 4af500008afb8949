"""Builds the edge side from ``edge``: the processor, the checks that read it, the purge watch (subscribed to
changes), the store of recent edge hops the trace page joins to spans, and the sources (``POST /v1/edge``, file
tailers) that hand each read's records to the processor, the purge watch and the hop store.

``factories()`` returns the traces builder and the edge builder sharing one hop store (no lookup by name): the
traces builder runs first and hands the store to the trace pages, the edge builder feeds it."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from sidecar.checks.edge.purge import PurgeWatch
from sidecar.checks.edge.sla import HitRatioSla
from sidecar.checks.edge.tail import TailLatency
from sidecar.component import Context
from sidecar.processors.edge import EdgeProcessor
from sidecar.processors.edge_record import EdgeSink
from sidecar.sources.edge.metrics import EdgeSourceMetrics
from sidecar.state.edge_hops import EdgeHops
from sidecar.wiring.traces import build as build_traces

__all__ = ["build", "factories"]

Factory = Callable[[Context], list[Any]]


def build(ctx: Context, hops: EdgeHops | None = None) -> list[Any]:
    cfg = ctx.config.edge
    if not cfg.enabled:
        return []
    processor = EdgeProcessor(cfg.series, registry=ctx.registry, clock=ctx.clock)
    out: list[Any] = [processor]
    sinks: list[EdgeSink] = [processor]
    if hops is not None:
        out.append(hops)
        sinks.append(hops)
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


def factories() -> tuple[Factory, Factory]:
    """(traces builder, edge builder): with the edge and the trace pages both on and ``edge.join.enabled``, the
    first makes the hop store and hands it to the trace pages, the second feeds it. One pair per Service."""
    made: list[EdgeHops] = []

    def traces(ctx: Context) -> list[Any]:
        made.clear()
        edge = ctx.config.edge
        if edge.enabled and edge.join.enabled and ctx.config.traces.enabled:
            made.append(EdgeHops(edge.join, registry=ctx.registry))
        return build_traces(ctx, edge_hops=made[0] if made else None)

    def edge(ctx: Context) -> list[Any]:
        return build(ctx, made[0] if made else None)

    return traces, edge
