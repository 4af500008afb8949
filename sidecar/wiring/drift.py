"""Builds the drift check from ``checks.drift`` and subscribes it to the events on the bus."""

from __future__ import annotations

from typing import Any

from sidecar.checks.drift.check import DriftCheck
from sidecar.component import Context
from sidecar.wiring.event_subs import subscribe_events

__all__ = ["build", "drift_check"]


def drift_check(ctx: Context) -> DriftCheck:
    """The drift check of ``ctx``'s config with its collaborators, subscribed to events (also for tests)."""
    check = DriftCheck(
        ctx.config.checks.drift,
        registry=ctx.registry,
        clock=ctx.clock,
        store=ctx.store,
        bus=ctx.bus,
        guard=ctx.guard,
        logger=ctx.logger.getChild("drift"),
    )
    subscribe_events(ctx.bus, check.name, check.observe, columns=check.observe)
    return check


def build(ctx: Context) -> list[Any]:
    if not ctx.config.checks.drift.enabled:
        return []
    return [drift_check(ctx)]
