"""Builds the business-metric checks and subscribes them to the events bus."""

from __future__ import annotations

from typing import Any

from sidecar.checks.business.check import BusinessChecks
from sidecar.component import Context
from sidecar.wiring.event_subs import subscribe_events

__all__ = ["build"]


def build(ctx: Context) -> list[Any]:
    cfg = ctx.config.checks.business
    if not cfg.enabled or not cfg.checks:
        return []
    comp = BusinessChecks(
        cfg, registry=ctx.registry, clock=ctx.clock, store=ctx.store, logger=ctx.logger.getChild("business")
    )
    subscribe_events(ctx.bus, comp.name, comp.observe, columns=comp.observe_columns)
    return [comp]
