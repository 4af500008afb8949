"""Builds the span side from ``traces`` config: hub (store + stage histograms), receiver, file tailer, pages,
failure join and the OTLP forwarder, each only where configured."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from sidecar.component import Context
from sidecar.wiring.span_subs import subscribe_spans

if TYPE_CHECKING:
    from sidecar.state.edge_hops import EdgeHops

__all__ = ["build"]


def build(ctx: Context, edge_hops: EdgeHops | None = None) -> list[Any]:
    cfg = ctx.config.traces
    if not cfg.enabled:
        return []
    from sidecar.pages.traces import TracePages
    from sidecar.sources.otlp.receiver import OtlpReceiver
    from sidecar.state.trace_hub import TraceHub

    log = ctx.logger.getChild("traces")
    hub = TraceHub(cfg, registry=ctx.registry, clock=ctx.clock, logger=log)
    # Subscription order is delivery order: the store takes a batch before the forwarder queues it.
    subscribe_spans(ctx.bus, hub.name, hub.on_spans, requests=hub.on_span_requests)
    # Over server.memory_limit_mib the trace store (the largest store of pushed data) evicts first.
    ctx.guard.admission.on_memory_pressure("traces", hub.relieve, hub.restore)
    out: list[Any] = [hub]
    if cfg.forward.endpoint:
        from exporters.otlp_forward import OtlpForwarder

        fwd = OtlpForwarder(
            cfg.forward, registry=ctx.registry, http=ctx.http, clock=ctx.clock, logger=log.getChild("forward")
        )
        subscribe_spans(ctx.bus, fwd.name, lambda batch: fwd.offer(batch.items))
        out.append(fwd)
    if cfg.receiver_enabled:
        from sidecar.sources.otlp.limits import SpanLimits

        limits = SpanLimits(cfg.limits.max_name_chars, cfg.limits.max_value_chars)
        out.append(
            OtlpReceiver(
                limits,
                bus=ctx.bus,
                guard=ctx.guard,
                registry=ctx.registry,
                clock=ctx.clock,
                logger=log.getChild("receiver"),
            )
        )
    if cfg.file.path and not ctx.config.events.triton_trace.enabled:
        # With events.triton_trace on, wiring/events.py builds the one reader of the trace files.
        from sidecar.wiring.trace_files import build as trace_files

        out.extend(trace_files(ctx, None))
    if cfg.failure_join.metrics_url:
        from sidecar.sources.triton_failures import FailureJoin

        out.append(
            FailureJoin(
                cfg.failure_join,
                hub=hub,
                http=ctx.http,
                registry=ctx.registry,
                clock=ctx.clock,
                logger=log.getChild("failures"),
            )
        )
    out.append(TracePages(hub, edge_hops=edge_hops))
    return out
