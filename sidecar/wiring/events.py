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

        out.append(EventsEndpoint(ctx, cfg, metrics))
    if cfg.jsonl:
        from sidecar.sources.events.jsonl import JsonlTailer

        out.extend(JsonlTailer(ctx, f, cfg, metrics, i) for i, f in enumerate(cfg.jsonl))
    if cfg.triton_trace.enabled:
        from sidecar.sources.trace_tensors import TensorTraceReader

        out.append(TensorTraceReader(ctx, cfg.triton_trace, metrics))
    return out
