"""Builds the events sources from ``events``: the HTTP endpoint, JSONL tailers, Triton tensors."""

from __future__ import annotations

from typing import Any

from sidecar.component import Context
from sidecar.sources.events.metrics import EventsMetrics

__all__ = ["build"]


def build(ctx: Context) -> list[Any]:
    cfg = ctx.config.events
    out: list[Any] = []
    if not (cfg.enabled or cfg.jsonl or cfg.triton_trace.enabled):
        return out
    metrics = EventsMetrics(ctx.registry)
    if cfg.enabled:
        from sidecar.sources.events.http import EventsEndpoint

        out.append(EventsEndpoint(cfg, metrics=metrics, bus=ctx.bus, guard=ctx.guard, clock=ctx.clock))
    if cfg.jsonl:
        from sidecar.sources.events.jsonl import JsonlTailer

        out.extend(
            JsonlTailer(
                f,
                events_cfg=cfg,
                metrics=metrics,
                bus=ctx.bus,
                clock=ctx.clock,
                store=ctx.store,
                registry=ctx.registry,
                logger=ctx.logger.getChild(f"events_jsonl_{i}"),
                index=i,
            )
            for i, f in enumerate(cfg.jsonl)
        )
    if cfg.triton_trace.enabled:
        # One reader per trace file: it also publishes the spans if traces.file names the same file.
        from sidecar.wiring.trace_files import build as trace_files

        out.extend(trace_files(ctx, metrics))
    return out
