"""Builds the canary verdict and subscribes it to events and spans."""

from __future__ import annotations

from typing import Any

from sidecar.checks.canary import CanaryCheck
from sidecar.component import Context

__all__ = ["build"]


def build(ctx: Context) -> list[Any]:
    cfg = ctx.config.checks.canary
    if not cfg.enabled:
        return []
    comp = CanaryCheck(cfg, registry=ctx.registry, clock=ctx.clock, logger=ctx.logger.getChild("canary"))
    ctx.bus.subscribe("events", comp.name, comp.observe)
    if cfg.spans:
        ctx.bus.subscribe("spans", comp.name, comp.observe)
    return [comp]
