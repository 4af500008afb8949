"""Builds the Triton metrics source."""

from __future__ import annotations

from typing import Any

from sidecar.component import Context
from sidecar.sources.triton_metrics import TritonMetricsSource

__all__ = ["build"]


def build(ctx: Context) -> list[Any]:
    cfg = ctx.config.triton
    if not cfg.enabled:
        return []
    source = TritonMetricsSource(cfg, registry=ctx.registry, clock=ctx.clock, http=ctx.http,
                                 logger=ctx.logger.getChild("triton"))
    ctx.bus.subscribe("gpus", source.name, source.on_gpus)
    return [source]
