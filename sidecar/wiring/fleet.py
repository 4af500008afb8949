"""Builds the fleet bins from ``checks.fleet`` beside the drift check whose references they bin, and, when
business checks are configured, the fleet business counters (their sums, counts and quantile bins).

``factories(drift)`` wraps the drift builder so the fleet builder gets the check it built (no lookup by name)
and subscribes the fleet bins to the events on the bus.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from sidecar.checks.drift.check import DriftCheck
from sidecar.checks.fleet.business import FleetBusiness
from sidecar.checks.fleet.check import FleetBins
from sidecar.component import Context
from sidecar.errors import ConfigError
from sidecar.wiring.event_subs import subscribe_events

__all__ = ["build", "factories"]

Factory = Callable[[Context], list[Any]]


def build(ctx: Context, drift: DriftCheck | None) -> list[Any]:
    cfg = ctx.config.checks.fleet
    if not cfg.enabled:
        return []
    if drift is None:
        raise ConfigError("checks.fleet.enabled", "the fleet bins need the drift check (checks.drift.enabled: true)")
    comp = FleetBins(cfg, references=drift, registry=ctx.registry, clock=ctx.clock, logger=ctx.logger.getChild("fleet"))
    subscribe_events(ctx.bus, comp.name, comp.observe, columns=comp.observe_columns)
    biz = ctx.config.checks.business
    if not (biz.enabled and biz.checks):
        return [comp]
    sums = FleetBusiness(
        cfg,
        checks=biz.checks,
        references=drift,
        registry=ctx.registry,
        clock=ctx.clock,
        logger=ctx.logger.getChild("fleet"),
    )
    subscribe_events(ctx.bus, sums.name, sums.observe, columns=sums.observe_columns)
    return [comp, sums]


def factories(drift_factory: Factory) -> tuple[Factory, Factory]:
    """(drift builder, fleet builder): the second builds the fleet bins over the check the first built."""
    built: list[DriftCheck] = []

    def drift(ctx: Context) -> list[Any]:
        out = drift_factory(ctx)
        built[:] = [c for c in out if isinstance(c, DriftCheck)]
        return out

    def fleet(ctx: Context) -> list[Any]:
        return build(ctx, built[0] if built else None)

    return drift, fleet
